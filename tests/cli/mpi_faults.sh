#!/usr/bin/env bash
# Faults under MPI (OpenMPI's mpirun, 2 ranks, the tiny chat model):
#   - a rank killed with SIGKILL mid-generation (rank 1, then rank 0): mpirun and every other rank exit
#     non-zero within 10 s and mpirun's message names the lost rank ("process rank N");
#   - ranks given different model files, or different flags: every rank refuses before loading weights
#     (the library compares a fingerprint of the file and the options) and the job exits non-zero; every rank
#     learns which rank differs and how, so the message is whole whichever rank prints first;
#   - training with different options on rank 1: the job refuses to train;
#   - one rank cannot open its file: it names the file and the job stops instead of hanging.
# Skipped when mpirun is missing or the CLI was built without MPI.
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
command -v mpirun >/dev/null || { echo "no mpirun: skipped"; exit 77; }
ldd "$CLI" 2>/dev/null | grep -q libmpi || { echo "CLI built without MPI: skipped"; exit 77; }
. "$(dirname "$0")/../cli_env.sh"
# sanitizer builds: OpenMPI's own allocations live until exit (tests/lsan.supp explains the full unwind)
SRC=${GM_SOURCE:-$(dirname "$0")/../..}
export LSAN_OPTIONS="suppressions=$SRC/tests/lsan.supp:$LSAN_OPTIONS"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
tmp=$(mktemp -d)
# killed ranks cannot remove their shared-memory segments: keep them in $tmp, which the trap removes
export OMPI_MCA_btl_vader_backing_directory=$tmp
mp=
children() { # pids whose parent is $1 (no procps needed)
  local f
  for f in /proc/[0-9]*/stat; do awk -v p="$1" '$4 == p { print $1 }' "$f" 2>/dev/null; done
}
trap '[ -n "$mp" ] && { for c in $(children $mp); do kill -9 $c; done; kill -9 $mp; } 2>/dev/null; rm -rf "$tmp"' EXIT
CHAT=$FIX/hf_tiny_chat

alive() { # a process that exists and is not a zombie (an exited rank whose parent is gone)
  [ -e "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

rank_pid() { # rank_pid MPIRUN_PID RANK
  local p
  for p in $(children "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}

for victim in 1 0; do
  name="rank $victim killed"
  mpirun --oversubscribe -np 2 "$CLI" generate -m "$CHAT" --cache-length 1048576 -n 1000000 Tell me a story \
    >"$tmp/out" 2>"$tmp/err" &
  mp=$!
  for _ in $(seq 600); do [ "$(stat -c %s "$tmp/out" 2>/dev/null || echo 0)" -ge 20 ] && break; sleep 0.1; done
  [ "$(stat -c %s "$tmp/out")" -ge 20 ] && ok "$name: generating" || bad "$name: no output: $(head -c 600 "$tmp/err")"
  others=$(children $mp | tr '\n' ' ')
  pid=$(rank_pid $mp $victim)
  [ -n "$pid" ] && ok "$name: found rank $victim (pid $pid)" || bad "$name: rank $victim not found"
  [ -n "$pid" ] && kill -9 "$pid"
  t0=$SECONDS
  for _ in $(seq 100); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
  if kill -0 $mp 2>/dev/null; then bad "$name: mpirun still running 10 s later"; kill -9 $mp; fi
  wait $mp
  rc=$?
  mp=
  left=0
  for p in $others; do alive "$p" && { left=1; kill -9 "$p"; }; done
  [ $rc -ne 0 ] && ok "$name: mpirun exit $rc" || bad "$name: mpirun exit 0"
  [ $((SECONDS - t0)) -le 10 ] && ok "$name: all gone in $((SECONDS - t0)) s" || bad "$name: took $((SECONDS - t0)) s"
  [ $left -eq 0 ] && ok "$name: no rank left running" || bad "$name: a rank was still running"
  grep -q "process rank $victim " "$tmp/err" && ok "$name: message names rank $victim" \
    || bad "$name: message: $(head -c 800 "$tmp/err")"
done

# mpmd NAME NEEDLE -- rank-0 args ::: rank-1 args: the job must exit non-zero quickly with NEEDLE on stderr
mpmd() {
  local name=$1 needle=$2
  shift 2
  local a=() b=() side=a
  for x in "$@"; do
    if [ "$x" = ":::" ]; then side=b; elif [ $side = a ]; then a+=("$x"); else b+=("$x"); fi
  done
  timeout 60 mpirun --oversubscribe -np 1 "$CLI" "${a[@]}" : -np 1 "$CLI" "${b[@]}" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && ok "$name: exit $rc" || bad "$name: exit $rc"
  grep -Eq "$needle" "$tmp/err" && ok "$name: message" || bad "$name: message: $(head -c 800 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok "$name: nothing generated" || bad "$name: generated: $(head -c 200 "$tmp/out")"
}
mpmd "different files" "rank 1: model file or flags differ from rank 0 \(file fingerprint [0-9a-f]+ vs [0-9a-f]+" \
  generate -m "$CHAT" -n 3 hello ::: generate -m "$FIX/hf_tiny" -n 3 hello
cp -r "$CHAT" "$tmp/copy"
chmod -R u+w "$tmp/copy"
python3 -c "
import json, struct, sys
p = sys.argv[1]
with open(p, 'r+b') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    t = json.loads(f.read(n))['model.norm.weight']
    f.seek(8 + n + t['data_offsets'][0])
    f.write(b'\x00\x00')
" "$tmp/copy/model.safetensors" 2>/dev/null && \
mpmd "same shapes, different weights" "differ from rank 0" \
  generate -m "$CHAT" -n 3 hello ::: generate -m "$tmp/copy" -n 3 hello
mpmd "different --cache-length" "cache 100 vs 4096" \
  generate -m "$CHAT" -n 3 hello ::: generate -m "$CHAT" --cache-length 100 -n 3 hello
printf '{"prompt": "hi", "response": "there"}\n%.0s' 1 2 3 4 >"$tmp/train.jsonl"
mpmd "train: different --lr" "rank 1: training options differ from rank 0's" \
  train -m "$CHAT" --data "$tmp/train.jsonl" --batch 2 --seq-len 16 --steps 1 --lr 1e-2 ::: \
  train -m "$CHAT" --data "$tmp/train.jsonl" --batch 2 --seq-len 16 --steps 1 --lr 1e-3
mpmd "rank 1 cannot open its file" "$tmp/missing: cannot open" \
  generate -m "$CHAT" -n 3 hello ::: generate -m "$tmp/missing" -n 3 hello

# and the healthy run works
timeout 60 mpirun --oversubscribe -np 2 "$CLI" generate -m "$CHAT" -n 5 hello >"$tmp/out" 2>"$tmp/err" \
  && [ -s "$tmp/out" ] && ok "2 ranks generate" || bad "2 ranks: $(head -c 800 "$tmp/err")"
exit $fail
