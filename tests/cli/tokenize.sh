#!/usr/bin/env bash
# `gemma tokenize` / `gemma detokenize` on the real model vs ids from HF `tokenizers`
# (tests/fixtures/tokenizer_parity.jsonl, made by tests/reference/gen_tokenizer_fixtures.py).
set -u
CLI=${GM_CLI:?GM_CLI is not set}
FIX=${GM_FIXTURES:?GM_FIXTURES is not set}
M=${GM_TEST_MODEL:-}
if [ -z "$M" ] || [ ! -f "$M" ]; then
    if [ "${GM_REQUIRE_MODEL:-0}" = 1 ]; then echo "model missing"; exit 1; fi
    echo "no model: skipped"; exit 77
fi
pass=0 fail=0
check() { # name, got, want
    if [ "$2" == "$3" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: got [$2] want [$3]"; fi
}
# ids and text of the fixture case whose JSON "text" (or "hex") field is exactly $2
field() { grep -F "\"$1\":\"$2\"," "$FIX/tokenizer_parity.jsonl" | head -1; }
ids_of() { field "$1" "$2" | sed 's/.*"ids":\[\([^]]*\)\].*/\1/'; }
dec_of() { field text "$1" | sed 's/.*"dec":"\(.*\)"}$/\1/'; }

for t in 'Hello world!' '<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n' '你好，世界！' \
         '👨‍👩‍👧‍👦' 'a  b' '    def indented():\n        return 4\n' 'https://www.example.com/path/to/page?query=1&other=two#fragment' \
         'नमस्ते दुनिया' '<h1>Title</h1>' '𠀀𠀁𠀂 rare CJK extension B'; do
    want=$(ids_of text "$t")
    [ -n "$want" ] || { fail=$((fail + 1)); echo "FAIL: no fixture case for $t"; continue; }
    got=$(printf '%b' "$t" | "$CLI" tokenize -m "$M" --json)
    check "tokenize '$t'" "$got" "[$want]"
    got=$(printf '%b' "$t" | "$CLI" tokenize -m "$M")
    check "tokenize (plain) '$t'" "$got" "${want//,/ }"
done
# byte fallback for invalid UTF-8 (fixture hex cases)
for h in ff e4b841 616263ff646566; do
    want=$(ids_of hex "$h")
    [ -n "$want" ] || { fail=$((fail + 1)); echo "FAIL: no fixture case for hex $h"; continue; }
    got=$(printf "$(echo "$h" | sed 's/../\\x&/g')" | "$CLI" tokenize -m "$M" --json)
    check "tokenize hex $h" "$got" "[$want]"
done
# --bos prepends <bos> = 2
check "--bos" "$(printf 'Hello world!' | "$CLI" tokenize -m "$M" --bos --json)" "[2,$(ids_of text 'Hello world!')]"
check "empty input" "$(printf '' | "$CLI" tokenize -m "$M" --json)" "[]"
# detokenize = HF decode(skip_special_tokens=True)
for t in 'Hello world!' '你好，世界！' 'Ünïcödé àccénts éverywhere: café, naïve, résumé, coöperate, Zürich.'; do
    ids=$(ids_of text "$t")
    check "detokenize '$t'" "$("$CLI" detokenize -m "$M" ${ids//,/ })" "$(dec_of "$t")"
done
check "detokenize skips control" "$("$CLI" detokenize -m "$M" 2 9259 1902 236888 1)" "Hello world!"
# errors: clear message, non-zero exit
out=$("$CLI" detokenize -m "$M" 262144 2>&1); rc=$?
check "detokenize out of range rc" "$rc" 1
case "$out" in *262144*) pass=$((pass + 1)) ;; *) fail=$((fail + 1)); echo "FAIL message: $out" ;; esac
out=$(printf x | "$CLI" tokenize -m /nonexistent.gguf 2>&1); rc=$?
check "missing model rc" "$rc" 1
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
