#!/usr/bin/env bash
# The transformers reference test of the real 270M (tests/unit/test_reference_270m.c: logits within 1e-3
# of the largest, identical top-10 ids and 64-token greedy continuations) on every kernel path this CPU
# has besides the default one: AVX-512 without AMX (GM_NO_AMX=1: prefill on the int8 input terms),
# the same with the int16 terms (GM_INT16_MATMUL=1; on AVX2 instead of the f32 batched products), AVX2
# (GM_KERNELS=avx2, where the CPU has AVX-512) and the f32 kernels on the
# file's layout (GM_EXACT=1); and the default path with the packed weights mapped from a weight cache
# (written by the GM_NO_AMX=1 run, or by a one-token load where that is the default path; mapped by a last
# run, on 2 threads: decode then cuts each token's attention into pieces of the cache, merged afterwards).
# Speed never buys wrong logits on any path.
# Then --precision fast (GM_TEST_PRECISION=fast), which rounds activations as llama.cpp does, against its
# own, looser bound (test_reference_270m.c: TOL_FAST), on the default kernels and on AVX2 where the CPU
# has AVX-512.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
REF="$GM_BUILD/test_reference_270m"
[ -x "$REF" ] || { echo "missing $REF"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# the greedy continuations' first 16 tokens on each extra path (all 64 on the default one, ctest's own
# test_reference_270m): decode is most of the test's time, 5x more on a slow 2-core machine
export GM_TEST_GREEDY_STEPS=16
pass=0 fail=0
WC="GM_TEST_WEIGHT_CACHE=$T/wc"
# Paths that are the default one on this CPU are left to ctest's own test_reference_270m: GM_NO_AMX=1
# without AMX (the cache is then written by a one-token load) and GM_KERNELS=avx2 without AVX-512.
if grep -qw amx_bf16 /proc/cpuinfo; then envs=("GM_NO_AMX=1 $WC"); else
  envs=()
  "$GM_BUILD/gemma" bench -m "$GM_TEST_MODEL" --prompt-tokens 1 --gen-tokens 0 --weight-cache "$T/wc" > /dev/null \
    || { echo "FAIL: writing the weight cache"; exit 1; }
fi
envs+=("GM_NO_AMX=1 GM_INT16_MATMUL=1")
grep -qw avx512f /proc/cpuinfo && envs+=("GM_KERNELS=avx2")
envs+=("GM_EXACT=1" "GM_TEST_PRECISION=fast")
# AVX2's own fast products (Q6_K's int8 product among them) where AVX-512 is the default
grep -qw avx512f /proc/cpuinfo && envs+=("GM_KERNELS=avx2 GM_TEST_PRECISION=fast")
envs+=("$WC GM_TEST_THREADS=2")
for env in "${envs[@]}"; do
  if env $env "$REF" > "$T/log" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL with $env:"; fi
  grep -E "passed|FAIL|long |weight cache|precision" "$T/log" | sed "s#^#  $env: #"
done
# the last run must have mapped every packed matrix from the cache written before
grep -q "weight cache mapped" "$T/log" || { fail=$((fail+1)); echo "FAIL: the last run did not map the weight cache"; }
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
