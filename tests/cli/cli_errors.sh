#!/usr/bin/env bash
# Bad input to the model commands: a clear message on stderr, a non-zero exit, nothing on stdout
# presented as a result.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
M=$GM_TEST_MODEL
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0 fail=0
# expect CODE PATTERN -- command...: exit code and a stderr line matching PATTERN, empty stdout
expect() {
  local code=$1 pat=$2; shift 3
  "$@" > "$T/out" 2> "$T/err"
  local rc=$?
  if [ $rc -eq "$code" ] && grep -qiE "$pat" "$T/err" && [ ! -s "$T/out" ]; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL (rc $rc, want $code, /$pat/): $*"; sed 's/^/  stderr: /' "$T/err" | head -3; sed 's/^/  stdout: /' "$T/out" | head -3; fi
}
expect 2 "empty prompt"            -- "$GM_CLI" generate -m "$M"
expect 2 "empty prompt"            -- "$GM_CLI" logits -m "$M"
expect 2 "unknown option '--frobnicate'" -- "$GM_CLI" generate -m "$M" --frobnicate "hi"
expect 2 "temperature"             -- "$GM_CLI" generate -m "$M" --temperature -1 "hi"
expect 2 "top-p"                   -- "$GM_CLI" generate -m "$M" --top-p 0 "hi"
expect 2 "top-p"                   -- "$GM_CLI" generate -m "$M" --top-p 1.5 "hi"
expect 2 "top-k"                   -- "$GM_CLI" generate -m "$M" --top-k 0 "hi"
expect 2 "sampling"                -- "$GM_CLI" generate -m "$M" --sampling nucleus "hi"
expect 2 "devices"                 -- "$GM_CLI" generate -m "$M" --devices 0 "hi"
expect 2 "kv-cache wants f32 or f16" -- "$GM_CLI" generate -m "$M" --kv-cache f8 "hi"
expect 2 "kv-cache wants f32 or f16" -- "$GM_CLI" logits -m "$M" --kv-cache
expect 2 "no model"                -- "$GM_CLI" generate "hi"
expect 1 "no such file"            -- "$GM_CLI" generate -m "$T/missing.gguf" "hi"
for i in $(seq 200); do echo "this is a text file, not a model"; done > "$T/text.gguf"
expect 1 "not a GGUF"              -- "$GM_CLI" logits -m "$T/text.gguf" "hi"
expect 1 "cache"                   -- "$GM_CLI" generate -m "$M" --cache-length 8 "a prompt that is certainly longer than eight tokens once templated"
expect 1 "cache"                   -- "$GM_CLI" logits -m "$M" --cache-length 4 "one two three four five six"
expect 2 "unknown command"         -- "$GM_CLI" frobnicate
# a model of another architecture: rewrite the architecture string of the real file's header
# copy the model, then overwrite the first "gemma3" (general.architecture's value) with "llama3"
cp "$M" "$T/other.gguf"
off=$(LC_ALL=C grep -obUa -m1 "gemma3" "$T/other.gguf" | head -1 | cut -d: -f1)
printf 'llama3' | dd of="$T/other.gguf" bs=1 seek="$off" conv=notrunc status=none
expect 1 "architecture 'llama3' is not supported" -- "$GM_CLI" generate -m "$T/other.gguf" "hi"
# a file cut short
head -c 100000 "$M" > "$T/short.gguf"
expect 1 "short.gguf"              -- "$GM_CLI" generate -m "$T/short.gguf" "hi"
# the cache filling up mid-answer is said, with its own exit code (3), after the partial text
"$GM_CLI" generate -m "$M" --raw --cache-length 12 --max-new-tokens 50 "The capital of France is" > "$T/out" 2> "$T/err"
rc=$?
if [ $rc -eq 3 ] && grep -q "KV cache is full" "$T/err" && [ -s "$T/out" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: cache full (rc $rc)"; cat "$T/err"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
