#!/usr/bin/env bash
# --wait auto|spin|yield on the real 270M (gemma bench --json: wait, last_token): one device of one
# thread spins; two devices pinned to one CPU (taskset) yield at once unless told to spin; the policy
# never changes what is computed (the same greedy tokens in every case); a bad value is refused.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
command -v taskset > /dev/null || { echo "taskset missing (util-linux)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PY=${GM_PYTHON:-python3}
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; fi; }
bench() { # [taskset prefix...] -- ARGS...: "wait last_token"
  local pre=()
  while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
  "${pre[@]}" "$GM_CLI" bench -m "$GM_TEST_MODEL" --cache-length 64 --prompt-tokens 8 --gen-tokens 8 --json "$@" \
    2> "$T/err" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print(d['wait'], d['last_token'])"
}
read -r w1 t1 <<< "$(bench -- --devices 1)"
read -r w2 t2 <<< "$(bench taskset -c 0 -- --devices 2)"
read -r w3 t3 <<< "$(bench taskset -c 0 -- --devices 2 --wait spin)"
read -r w4 t4 <<< "$(bench -- --devices 1 --wait yield)"
check "1 device x 1 thread: spin ($w1)" '[ "$w1" = spin ] && [ -n "$t1" ]'
check "2 devices on 1 CPU: yield ($w2)" '[ "$w2" = yield ]'
check "  --wait spin overrides it ($w3)" '[ "$w3" = spin ]'
check "--wait yield on 1 device ($w4)" '[ "$w4" = yield ]'
check "the same tokens under every policy ($t1 $t2 $t3 $t4)" '[ "$t2" = "$t1" ] && [ "$t3" = "$t1" ] && [ "$t4" = "$t1" ]'
"$GM_CLI" bench -m "$GM_TEST_MODEL" --wait sometimes --json > "$T/out" 2> "$T/err"; rc=$?
check "--wait sometimes: exit 2 naming --wait (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--wait" "$T/err" && [ ! -s "$T/out" ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
