#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -DGM_FUZZ=ON: ASan + UBSan + coverage) into build-fuzz and runs
# each one for SECONDS on its committed seed corpus tests/fuzz/corpus/<name>/.
# New interesting inputs go to a scratch folder (the committed corpus is not modified, unless
# GM_FUZZ_CORPUS_OUT names a folder to keep them in); a crashing input is saved under
# build-fuzz/artifacts/ and must become a regression test (copy it into tests/fuzz/corpus/<name>/ and
# add a unit test naming the bug). Harnesses run GM_FUZZ_JOBS (default: the core count) at a time.
# Prints one line per harness: runs, seconds, coverage.
#
# usage: scripts/fuzz.sh [SECONDS per harness, default 30] [HARNESS...]   (default: every tests/fuzz/fuzz_*.c)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
secs=${1:-30}
[ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then names=("$@"); else
  names=()
  for f in tests/fuzz/fuzz_*.c; do names+=("$(basename "$f" .c)"); done
fi
export GM_TEST_MODEL=${GM_TEST_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DGM_TEST_MODEL="$GM_TEST_MODEL" >/dev/null || exit 1
cmake --build build-fuzz -j"$(nproc)" >/dev/null || { cmake --build build-fuzz -j1; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p build-fuzz/artifacts
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# one harness: its result line into $work/<name>.result, its exit status into $work/<name>.rc
run_one() {
  local n=$1 out log t0 t1 rc runs cov
  out=${GM_FUZZ_CORPUS_OUT:+$GM_FUZZ_CORPUS_OUT/$n}
  out=${out:-$work/$n}
  mkdir -p "$out"
  log=build-fuzz/artifacts/$n.log
  t0=$(date +%s)
  # -timeout: an input running 30 s is a hang; -rss_limit_mb: a leak or runaway allocation fails too
  build-fuzz/"$n" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
      -artifact_prefix=build-fuzz/artifacts/"$n"- "$out" tests/fuzz/corpus/"$n" >"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'DONE *cov: [0-9]* ft: [0-9]*' "$log" | tail -1 | sed 's/DONE *//')
  {
    if [ $rc -eq 0 ]; then
      printf '%-22s ok    %8s runs in %4d s  %s\n' "$n" "$runs" $((t1 - t0)) "$cov"
    else
      printf '%-22s FAIL  (exit %d after %d s; log %s)\n' "$n" $rc $((t1 - t0)) "$log"
      grep -E 'ERROR|SUMMARY|runtime error|property failed|Test unit written|fuzz_' "$log" | head -20
    fi
  } > "$work/$n.result"
  echo $rc > "$work/$n.rc"
}
# GM_FUZZ_JOBS harnesses at a time (default: one per core; each harness is one process on one core)
parallel=${GM_FUZZ_JOBS:-$(nproc)}
[ "$parallel" -ge 1 ] 2>/dev/null || parallel=1 # 0 or not a number: one at a time
for n in "${names[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
  run_one "$n" &
done
wait
failed=0
for n in "${names[@]}"; do
  cat "$work/$n.result"
  [ "$(cat "$work/$n.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit $failed
