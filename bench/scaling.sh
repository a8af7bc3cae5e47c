#!/usr/bin/env bash
# Decode and prefill speed of one model over 1, 2 and 4 devices: in-process devices (threads that own
# shards), MPI ranks, and one device with several threads, with the share of decode time spent in
# collectives. Prints a markdown table (docs/BENCHMARKS.md, "Scaling") and the two ratios of the sharding
# issue's speed line: 2 devices of one thread against 1 device of one thread, and against 1 device of 2 threads.
#   bash bench/scaling.sh MODEL.gguf [GEN_TOKENS] [PROMPT_TOKENS] [REPS]
set -euo pipefail
M=${1:?model}; G=${2:-32}; P=${3:-128}; R=${4:-3}
CLI=${GM_CLI:-build/gemma}
DECODE=$(mktemp); trap 'rm -f "$DECODE"' EXIT # "label<TAB>decode tok/s" per row, for the ratios
. "$(dirname "$0")/../tests/cli_env.sh"
row() { # label, launcher..., -- extra flags
  local label=$1; shift
  local out
  out=$("$@" --prompt-tokens "$P" --gen-tokens "$G" --reps "$R" --json 2>/dev/null | tail -1)
  python3 - "$label" "$out" "$DECODE" <<'PY'
import json, sys
d = json.loads(sys.argv[2])
with open(sys.argv[3], "a") as f:
    f.write("%s\t%.4f\n" % (sys.argv[1], d["decode_tok_s"]))
share = d.get("comm_seconds_per_token", 0) * d["decode_tok_s"] * 100 if d.get("decode_tok_s") else 0
print("| %s | %.2f | %.1f | %.0f | %.1f %% |" % (sys.argv[1], d["decode_tok_s"], d["prefill_tok_s"],
      d["comm_bytes_per_token"], share))
PY
}
echo "uptime before: $(uptime)"
echo
echo "| configuration | decode tok/s | prefill tok/s | comm bytes/token | comm share of decode |"
echo "|---|---:|---:|---:|---:|"
row "1 device, 1 thread" "$CLI" bench -m "$M" --devices 1 --threads 1
row "1 device, 2 threads" "$CLI" bench -m "$M" --devices 1 --threads 2
row "2 devices (threads), 1 thread each" "$CLI" bench -m "$M" --devices 2 --threads 1
row "4 devices (threads), 1 thread each" "$CLI" bench -m "$M" --devices 4 --threads 1
row "2 MPI ranks x 1 device" mpirun -np 2 "$CLI" bench -m "$M" --devices 1
row "4 MPI ranks x 1 device" mpirun -np 4 "$CLI" bench -m "$M" --devices 1
row "2 MPI ranks x 2 devices" mpirun -np 2 "$CLI" bench -m "$M" --devices 2
echo
python3 - "$DECODE" <<'PY'
import sys
d = dict(line.rstrip("\n").split("\t") for line in open(sys.argv[1]))
two, one, threads = (float(d[k]) for k in ("2 devices (threads), 1 thread each", "1 device, 1 thread", "1 device, 2 threads"))
print("2 devices x 1 thread against 1 device x 1 thread: %.2fx; against 1 device x 2 threads: %+.1f %%" %
      (two / one, 100 * (two / threads - 1)))
PY
echo
echo "uptime after: $(uptime)"
