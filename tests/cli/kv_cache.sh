#!/usr/bin/env bash
# --kv-cache f16 on the real 270M: a 286-token prompt's next-token logits stay within the reference
# tolerance (1e-3 of the largest logit) of the f32 cache's, which test_reference_270m holds to
# transformers, yet differ from them (the cache really is half precision); the cache takes half the
# memory (gemma bench --json: kv_cache, kv_bytes_this_rank); --precision fast picks f16 unless told
# f32. (Fast mode's f16 cache against transformers: cli_reference_kernel_paths.)
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
DIFF="$GM_BUILD/tests-tools/logits_diff"
PY=${GM_PYTHON:-python3}
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; fi; }
# the story300 prompt of the reference fixtures (286 tokens with BOS)
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(next(p['text'] for p in d['prompts'] if p['name']=='story300'), end='')" \
  "$GM_FIXTURES/gemma3_270m/prompts.json" > "$T/prompt.txt" || { echo "FAIL: prompt"; exit 1; }
for kv in f32 f16; do
  "$GM_CLI" logits -m "$GM_TEST_MODEL" --cache-length 512 --kv-cache $kv --dump-logits "$T/$kv.bin" \
    "$(cat "$T/prompt.txt")" > "$T/$kv.log" 2>&1 || { echo "FAIL: logits --kv-cache $kv"; cat "$T/$kv.log"; exit 1; }
done
check "f16 cache: logits within 1e-3 of the largest of the f32 cache's" '"$DIFF" "$T/f32.bin" "$T/f16.bin" 1e-3'
check "  and not identical to them" '! cmp -s "$T/f32.bin" "$T/f16.bin"'
bench() { # ARGS...: "kv_cache kv_bytes_this_rank" of a short gemma bench run
  "$GM_CLI" bench -m "$GM_TEST_MODEL" --cache-length 1024 --prompt-tokens 8 --gen-tokens 2 --json "$@" 2> "$T/bench.err" |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); print(d['kv_cache'], int(d['kv_bytes_this_rank']))"
}
read -r t32 b32 <<< "$(bench)"
read -r t16 b16 <<< "$(bench --kv-cache f16)"
read -r tf bf <<< "$(bench --precision fast)"
read -r tf32 bf32 <<< "$(bench --precision fast --kv-cache f32)"
check "exact precision: f32 cache by default ($t32, $b32 bytes)" '[ "$t32" = f32 ] && [ "${b32:-0}" -gt 0 ]'
check "--kv-cache f16: half the bytes ($t16, $b16)" '[ "$t16" = f16 ] && [ "$((2 * ${b16:-0}))" = "$b32" ]'
check "--precision fast: f16 by default ($tf, $bf)" '[ "$tf" = f16 ] && [ "$bf" = "$b16" ]'
check "--precision fast --kv-cache f32: f32 ($tf32, $bf32)" '[ "$tf32" = f32 ] && [ "$bf32" = "$b32" ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
