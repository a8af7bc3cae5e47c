#!/usr/bin/env bash
# The same prompt gives the same logits (1e-4 of the largest) and the same greedy text on 1 device,
# 2 MPI ranks, 2 ranks x 2 devices, and 3 ranks, with fsdp and tp plans; only rank 0 prints. The
# references are every logit exact (--full-logits), the ranks' greedy and top-k text screened (the
# screened vocabulary product over ranks: docs/DESIGN.md), which must not change a token.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
command -v mpirun >/dev/null || { echo "mpirun missing"; exit 1; }
. "$(dirname "$0")/../cli_env.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
DIFF="$GM_BUILD/tests-tools/logits_diff"
PROMPT="The history of the Roman Empire is"
fail=0 pass=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }

"$GM_CLI" logits -m "$GM_TEST_MODEL" --cache-length 128 --dump-logits "$T/ref.bin" "$PROMPT" > /dev/null || exit 1
"$GM_CLI" generate -m "$GM_TEST_MODEL" --raw --cache-length 128 --max-new-tokens 12 --full-logits "$PROMPT" > "$T/ref.txt" || exit 1
TOPK="--top-k 5 --temperature 1.5 --seed 11"
"$GM_CLI" generate -m "$GM_TEST_MODEL" --raw --cache-length 128 --max-new-tokens 12 $TOPK --full-logits "$PROMPT" \
    > "$T/ref_topk.txt" || exit 1
for cfg in "2 1 fsdp" "2 2 fsdp" "3 1 fsdp" "2 2 tp"; do
  set -- $cfg
  ranks=$1 dev=$2 rule=$3
  timeout 120 mpirun -np "$ranks" --oversubscribe "$GM_CLI" logits -m "$GM_TEST_MODEL" --devices "$dev" --sharding "$rule" \
      --cache-length 128 --dump-logits "$T/got.bin" "$PROMPT" > "$T/out.txt" 2> "$T/err.txt"
  check test $? -eq 0
  check "$DIFF" "$T/ref.bin" "$T/got.bin" 1e-4
  # only rank 0 prints: one header line, not one per rank
  check test "$(grep -c 'next-token distribution' "$T/out.txt")" -eq 1
  timeout 120 mpirun -np "$ranks" --oversubscribe "$GM_CLI" generate -m "$GM_TEST_MODEL" --devices "$dev" --sharding "$rule" \
      --raw --cache-length 128 --max-new-tokens 12 "$PROMPT" > "$T/got.txt" 2>> "$T/err.txt"
  check cmp -s "$T/ref.txt" "$T/got.txt"
  timeout 120 mpirun -np "$ranks" --oversubscribe "$GM_CLI" generate -m "$GM_TEST_MODEL" --devices "$dev" --sharding "$rule" \
      --raw --cache-length 128 --max-new-tokens 12 $TOPK "$PROMPT" > "$T/got.txt" 2>> "$T/err.txt"
  check cmp -s "$T/ref_topk.txt" "$T/got.txt"
  [ $fail -gt 0 ] && { echo "config: $cfg"; cat "$T/err.txt"; }
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
