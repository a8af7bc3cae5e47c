#!/usr/bin/env bash
# Per-rank peak memory with R ranks stays within 1.15 x (this rank's weight slices + its KV cache +
# its activations), measured by /usr/bin/time -v around each rank: no rank holds the whole model. Runs on
# the real 270M and on the random-weight 1B-shaped file (tests/reference/make_random_gguf.py).
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time missing (Debian package 'time')"; exit 1; }
[ "${GM_SANITIZED:-0}" = 1 ] && exit 77 # ASan's shadow memory makes RSS meaningless
. "$(dirname "$0")/../cli_env.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0 fail=0
PY=${GM_PYTHON:-python3}
models="$GM_TEST_MODEL"
if "$PY" "$GM_SOURCE/tests/reference/make_random_gguf.py" --shape 1b --dtype f32 --out "$T/random-1b.gguf" > "$T/gen.log" 2>&1; then
  models="$models $T/random-1b.gguf"
else
  echo "FAIL: make_random_gguf.py"; cat "$T/gen.log"; fail=$((fail+1))
fi
for model in $models; do
for R in 1 2 4; do
  timeout 300 mpirun -np $R --oversubscribe bash -c \
    '/usr/bin/time -v -o "$0/time.$OMPI_COMM_WORLD_RANK" "$1" bench -m "$2" --prompt-tokens 32 --gen-tokens 4 --cache-length 512 --json > "$0/bench.$OMPI_COMM_WORLD_RANK"' \
    "$T" "$GM_CLI" "$model" || { echo "FAIL: mpirun -np $R"; fail=$((fail+1)); continue; }
  # every rank's plan holds the same bytes here; rank 0 reports them
  budget=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(int(1.15*(d["weight_bytes_this_rank"]+d["kv_bytes_this_rank"]+d["activation_bytes_this_rank"])/1024))' "$T/bench.0")
  whole=$(stat -c %s "$model")
  for r in $(seq 0 $((R-1))); do
    rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); print $2}' "$T/time.$r")
    if [ "$rss" -le "$budget" ]; then pass=$((pass+1)); else fail=$((fail+1)); fi
    echo "$(basename "$model"): ranks $R rank $r: peak RSS $rss KB, budget $budget KB (model file $((whole/1024)) KB)"
  done
done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
