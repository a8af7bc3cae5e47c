#!/usr/bin/env bash
# gemma bench with a sampler in the decode loop (the real 270M, 8-token prompt, 8 decoded tokens):
# top-k 1 picks what greedy picks; top-p 0.9 at T = 1 draws something else for some seed and the same
# tokens again for the same seed; --json names the method and its settings; bad sampling flags are
# refused with exit 2 and the flag's name.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PY=${GM_PYTHON:-python3}
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; fi; }
bench() { # ARGS...: "method last_token" of a short run
  "$GM_CLI" bench -m "$GM_TEST_MODEL" --cache-length 64 --prompt-tokens 8 --gen-tokens 8 --json "$@" 2> "$T/err" |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); print(d['sampling']['method'], d['last_token'])"
}
read -r mg tg <<< "$(bench)"
read -r mk tk <<< "$(bench --top-k 1 --temperature 1)"
check "greedy by default ($mg, last token $tg)" '[ "$mg" = greedy ] && [ "${tg:--1}" -ge 0 ]'
check "top-k 1 picks greedy's tokens ($mk, $tk)" '[ "$mk" = top-k ] && [ "$tk" = "$tg" ]'
differs=0
for seed in 1 2 3 4; do
  read -r mp tp <<< "$(bench --top-p 0.9 --temperature 1 --seed $seed)"
  [ "$mp" = top-p ] && [ -n "$tp" ] && [ "$tp" != "$tg" ] && differs=$((differs+1))
done
check "top-p 0.9 draws other tokens than greedy for some seed ($differs of 4)" '[ $differs -ge 1 ]'
read -r _ t1 <<< "$(bench --top-p 0.9 --seed 3)"
read -r _ t2 <<< "$(bench --top-p 0.9 --seed 3)"
check "the same seed draws the same tokens ($t1, $t2)" '[ -n "$t1" ] && [ "$t1" = "$t2" ]'
"$GM_CLI" bench -m "$GM_TEST_MODEL" --top-p 0 --json > "$T/out" 2> "$T/err"; rc=$?
check "--top-p 0: exit 2 naming --top-p (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--top-p" "$T/err" && [ ! -s "$T/out" ]'
"$GM_CLI" bench -m "$GM_TEST_MODEL" --sampling best --json > "$T/out" 2> "$T/err"; rc=$?
check "--sampling best: exit 2 naming --sampling (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--sampling" "$T/err"'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
