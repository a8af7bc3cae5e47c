#!/usr/bin/env bash
# Batched prompts split by rows over devices (FIRST_DIM): each row's greedy text equals the same prompt
# generated alone, on 1 device, 2 devices (3 rows: padded), 3 devices, and 2 MPI ranks x 2 devices.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
. "$(dirname "$0")/../cli_env.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
M=$GM_TEST_MODEL
printf 'The capital of France is\nThe history of the Roman Empire is\ndef fibonacci(n):\n' > "$T/prompts.txt"
pass=0 fail=0
expected() { # the batch output format, built from one generate call per prompt
  local i=0
  while IFS= read -r p; do
    i=$((i+1))
    printf '### %d: %s\n' "$i" "$p"
    "$GM_CLI" generate -m "$M" --raw --cache-length 256 --max-new-tokens 16 "$p"
    printf '\n'
  done < "$T/prompts.txt"
}
expected > "$T/want.txt" || exit 1
for devices in 1 2 3; do
  "$GM_CLI" generate -m "$M" --devices "$devices" --raw --cache-length 256 --max-new-tokens 16 --batch "$T/prompts.txt" > "$T/got.txt" 2> "$T/err.txt"
  if cmp -s "$T/want.txt" "$T/got.txt"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $devices devices"; diff "$T/want.txt" "$T/got.txt" | head; cat "$T/err.txt"; fi
done
timeout 120 mpirun -np 2 --oversubscribe "$GM_CLI" generate -m "$M" --devices 2 --raw --cache-length 256 --max-new-tokens 16 \
  --batch "$T/prompts.txt" > "$T/got.txt" 2> "$T/err.txt"
if cmp -s "$T/want.txt" "$T/got.txt"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: 2 ranks x 2 devices"; diff "$T/want.txt" "$T/got.txt" | head; cat "$T/err.txt"; fi
# --json: one object per prompt
"$GM_CLI" generate -m "$M" --devices 2 --raw --max-new-tokens 4 --json --batch "$T/prompts.txt" > "$T/got.json"
if [ "$(grep -c '^{"prompt":' "$T/got.json")" -eq 3 ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: json"; cat "$T/got.json"; fi
# an empty batch file is refused
: > "$T/empty.txt"
if "$GM_CLI" generate -m "$M" --batch "$T/empty.txt" > "$T/out" 2> "$T/err" ; then fail=$((fail+1)); echo "FAIL: empty batch accepted"; else pass=$((pass+1)); fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
