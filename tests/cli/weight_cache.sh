#!/usr/bin/env bash
# --weight-cache on the real 270M: the first load writes one file per device and one tokenizer file,
# later loads map them, and the logits are the same bytes as without a cache (1 and 2 devices). A cache
# file cut short, with a damaged table, from another model file or from kernels that pack Q5_0 as
# another kind is never used: the load packs from the model and writes it again; a tokenizer file cut
# short or with one byte changed is built again the same way; a Hugging Face folder works the same. A
# cache that cannot be written is a warning, not a failed command. (The transformers reference test runs
# on a mapped cache in reference_kernel_paths.sh; test_tokenizer_gguf checks the mapped tokenizer against
# Hugging Face `tokenizers`.)
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
G="$GM_BUILD/gemma"
M="$GM_TEST_MODEL"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok    $1"; }
bad() { fail=$((fail+1)); echo "FAIL  $1"; [ -f "$T/err" ] && sed 's/^/      /' "$T/err"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
PROMPT="The capital of France is"
# two loads with the extra flags: `bench --json` (its weight_cache state goes to $T/state, its
# tokenizer_cache state to $T/tstate), then the logits of PROMPT into $1
bench_state() {
  "$G" bench -m "$M" --cache-length 64 --prompt-tokens 4 --gen-tokens 0 --json "$@" 2> "$T/err" > "$T/json"
  grep -o '"weight_cache":"[a-z]*"' "$T/json" | cut -d'"' -f4 > "$T/state"
  grep -o '"tokenizer_cache":"[a-z]*"' "$T/json" | cut -d'"' -f4 > "$T/tstate"
}
run() {
  local out=$1; shift
  bench_state "$@"
  "$G" logits -m "$M" --cache-length 64 --dump-logits "$out" "$@" "$PROMPT" > /dev/null 2>> "$T/err"
}
state() { cat "$T/state"; }
tstate() { cat "$T/tstate"; }

run "$T/ref1" || bad "load without a cache"
run "$T/ref2" --devices 2 || bad "load on 2 devices without a cache"

C="$T/cache"
run "$T/a" --weight-cache "$C"
check "first load writes the cache (states $(state), $(tstate))" \
  '[ "$(state)" = written ] && [ "$(tstate)" = written ] && [ "$(ls "$C"/*.gmpack | wc -l)" = 1 ] && [ "$(ls "$C"/*.gmtok | wc -l)" = 1 ]'
check "logits from the mapped cache equal those without" 'cmp -s "$T/ref1" "$T/a"'
run "$T/b" --weight-cache "$C"
check "later loads map it (states $(state), $(tstate)), same logits" \
  '[ "$(state)" = mapped ] && [ "$(tstate)" = mapped ] && cmp -s "$T/ref1" "$T/b"'
F=$(ls "$C"/*-d0of1.gmpack 2>/dev/null | head -1)
check "one file named after the model and device" '[ -n "$F" ] && [ -s "$F" ]'
TF=$(ls "$C"/gemma-3-270m-q4_k_m.gguf-*.gmtok 2>/dev/null | head -1)
check "one tokenizer file named after the model" '[ -n "$TF" ] && [ -s "$TF" ]'
"$G" bench -m "$M" --cache-length 64 --prompt-tokens 4 --gen-tokens 0 --weight-cache "$C" > "$T/text" 2> "$T/err"
check "bench's text names both states" 'grep -q "weight cache: mapped, tokenizer cache: mapped" "$T/text"'

run "$T/c" --weight-cache "$C" --devices 2
check "2 devices: written (state $(state)), a file per device" '[ "$(state)" = written ] && [ -f "$(ls "$C"/*-d0of2.gmpack | head -1)" ] && [ -f "$(ls "$C"/*-d1of2.gmpack | head -1)" ]'
run "$T/d" --weight-cache "$C" --devices 2
check "2 devices: mapped (state $(state)), same logits as without a cache" '[ "$(state)" = mapped ] && cmp -s "$T/ref2" "$T/d"'

# Q5_0 packs as 8-bit tiles on AVX2 and as 5-bit ones on the scalar path: a cache written by one kind of
# kernels is not mapped by the other (its own file), and each maps its own afterwards
if grep -qw avx2 /proc/cpuinfo; then
  K="$T/kcache"
  GM_KERNELS=avx2 bench_state --weight-cache "$K"; k1=$(state)
  GM_KERNELS=scalar bench_state --weight-cache "$K"; k2=$(state)
  GM_KERNELS=avx2 bench_state --weight-cache "$K"; k3=$(state)
  GM_KERNELS=scalar bench_state --weight-cache "$K"; k4=$(state)
  check "AVX2 and scalar kernels keep their own caches ($k1, $k2, $k3, $k4)" \
    '[ "$k1 $k2 $k3 $k4" = "written written mapped mapped" ] && [ "$(ls "$K"/*.gmpack | wc -l)" = 2 ]'
fi

# the tokenizer file: one byte changed deep inside (the hash), then cut short (the size): built again,
# written again whole, same logits
tsize=$(stat -c %s "$TF")
printf '\x5a' | dd of="$TF" bs=1 seek=$((tsize / 2)) conv=notrunc status=none
run "$T/t1" --weight-cache "$C"
check "a tokenizer file with a changed byte is not used: built again (state $(tstate)), same logits" \
  '[ "$(tstate)" = written ] && cmp -s "$T/ref1" "$T/t1"'
truncate -s $((tsize - 4096)) "$TF"
run "$T/t2" --weight-cache "$C"
check "a tokenizer file cut short is not used: built again (state $(tstate)), written whole" \
  '[ "$(tstate)" = written ] && [ "$(stat -c %s "$TF")" = "$tsize" ] && cmp -s "$T/ref1" "$T/t2"'
run "$T/t3" --weight-cache "$C"
check "  then mapped (state $(tstate)), same logits" '[ "$(tstate)" = mapped ] && cmp -s "$T/ref1" "$T/t3"'

size=$(stat -c %s "$F")
truncate -s $((size / 2)) "$F"
run "$T/e" --weight-cache "$C"
check "a cache cut short is not used: packed again (state $(state))" '[ "$(state)" = written ]'
check "  and written again whole, then mapped with the same logits" '[ "$(stat -c %s "$F")" = "$size" ] && cmp -s "$T/ref1" "$T/e"'

printf '\xff' | dd of="$F" bs=1 seek=100 conv=notrunc status=none # inside the table
run "$T/f" --weight-cache "$C"
check "a damaged table is not used: packed again (state $(state)), same logits" '[ "$(state)" = written ] && cmp -s "$T/ref1" "$T/f"'

cp "$M" "$T/copy.gguf"
M2="$T/copy.gguf"
"$G" logits -m "$M2" --cache-length 64 --weight-cache "$C" --dump-logits "$T/g" "$PROMPT" > /dev/null 2> "$T/err"
touch -d '2001-01-01' "$M2" # same bytes, another modification time: another key
"$G" bench -m "$M2" --cache-length 64 --prompt-tokens 4 --gen-tokens 0 --json --weight-cache "$C" 2> "$T/err" \
  | grep -o '"weight_cache":"[a-z]*"' | cut -d'"' -f4 > "$T/state"
check "a rewritten model file does not use the old caches (state $(state))" \
  '[ "$(state)" = written ] && [ "$(ls "$C"/copy.gguf-*-d0of1.gmpack | wc -l)" = 2 ] && [ "$(ls "$C"/copy.gguf-*.gmtok | wc -l)" = 2 ]'
check "  logits of the copy equal the original's" 'cmp -s "$T/ref1" "$T/g"'

H="${GM_FIXTURES:-$(dirname "$0")/../fixtures}/hf_tiny" # a Hugging Face folder (safetensors): keyed by its files too
"$G" logits -m "$H" --tokens 2,5,7 --dump-logits "$T/h0" > /dev/null 2> "$T/err"
for i in 1 2; do
  "$G" bench -m "$H" --prompt-tokens 4 --gen-tokens 0 --json --weight-cache "$T/hc" 2> "$T/err" \
    | grep -o '"weight_cache":"[a-z]*"' | cut -d'"' -f4 > "$T/state"
  s[$i]=$(state)
done
"$G" logits -m "$H" --tokens 2,5,7 --weight-cache "$T/hc" --dump-logits "$T/h1" > /dev/null 2> "$T/err"
check "a Hugging Face folder: written, then mapped (${s[1]}, ${s[2]}), same logits" \
  '[ "${s[1]}" = written ] && [ "${s[2]}" = mapped ] && cmp -s "$T/h0" "$T/h1"'

touch "$T/afile"
"$G" logits -m "$M" --cache-length 64 --weight-cache "$T/afile" --dump-logits "$T/h" "$PROMPT" > /dev/null 2> "$T/err"
rc=$?
check "an unwritable cache directory: exit 0, a warning naming it" '[ $rc = 0 ] && grep -q "warning: weight cache: cannot .*afile" "$T/err" && grep -q "warning: tokenizer cache: cannot .*afile" "$T/err" && cmp -s "$T/ref1" "$T/h"'

"$G" logits -m "$M" --weight-cache > /dev/null 2> "$T/err"
rc=$?
check "--weight-cache without a directory is a usage error (exit $rc)" '[ $rc = 2 ] && grep -q "weight-cache" "$T/err"'
"$G" logits -m "$M" --weight-cache= "$PROMPT" > /dev/null 2> "$T/err"
rc=$?
check "--weight-cache= (empty) is a usage error (exit $rc)" '[ $rc = 2 ]'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
