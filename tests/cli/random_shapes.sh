#!/usr/bin/env bash
# Random-weight models with the 1B, 4B and 27B layer shapes (2 layers, full widths, vocab 1024; written
# now by tests/reference/make_random_gguf.py, checked by sha256): logits at every position match
# transformers (1e-3 of the largest) on 1, 2, 3, 4 and 8 devices with fsdp and tp, and on 2 MPI ranks x
# 2 devices. Covers GQA with several kv heads, x8 RoPE scaling and the 27B query scale.
set -u
PY=${GM_PYTHON:-python3}
"$PY" -c "import numpy, gguf" 2>/dev/null || { echo "$PY lacks numpy/gguf (scripts/setup.sh installs them)"; exit 1; }
. "$(dirname "$0")/../cli_env.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
CHECK="$GM_BUILD/tests-tools/random_shapes_check"
shapes="1b 4b 27b"
[ "${GM_SANITIZED:-0}" = 1 ] && shapes="1b 4b" # the 27B shape's 1.7 GB is slow under ASan
pass=0 fail=0
run() { if "$@" > "$T/log" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*"; cat "$T/log"; fi; grep -h "max |diff|" "$T/log"; }
for s in $shapes; do
  dtype=f32; [ "$s" = 27b ] && dtype=bf16 # same values (all bf16-rounded), half the bytes
  "$PY" "$GM_SOURCE/tests/reference/make_random_gguf.py" --shape "$s" --dtype $dtype --out "$T/$s.gguf" > "$T/gen.log" 2>&1 \
    || { echo "FAIL: make_random_gguf.py $s (sha256 or write)"; cat "$T/gen.log"; fail=$((fail+1)); continue; }
  for cfg in "1 replicated" "2 fsdp" "3 fsdp" "4 fsdp" "8 fsdp" "2 tp" "4 tp"; do
    run "$CHECK" "$T/$s.gguf" "$s" $cfg
  done
  run timeout 300 mpirun -np 2 --oversubscribe "$CHECK" "$T/$s.gguf" "$s" 2 fsdp
  rm -f "$T/$s.gguf"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
