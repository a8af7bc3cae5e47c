#!/usr/bin/env bash
# Sets up (Debian packages, model, build) and runs the whole test suite: the Release build's ctest,
# then the same suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on, MPI tests
# included), then every libFuzzer harness for GM_FUZZ_SECONDS (30) on its committed seed corpus.
# GM_SKIP_SANITIZE=1 / GM_SKIP_FUZZ=1 skip those stages. Prints each stage's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
T0=$SECONDS
stage_start=$SECONDS
stage_done() { echo "== $1: $((SECONDS - stage_start)) s (total $((SECONDS - T0)) s)"; stage_start=$SECONDS; }
bash scripts/setup.sh
stage_done "setup and Release build"
export GM_REQUIRE_MODEL=1
# MPI tests run several ranks on a 2-core machine, as root in CI.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

echo "== Release build: ctest"
ctest --test-dir build --output-on-failure -j2 --timeout 900
stage_done "Release ctest"

if [ "${GM_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan + UBSan build: ctest"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_SANITIZE=ON \
        -DGM_TEST_MODEL="$ROOT/models/gemma-3-270m-q4_k_m.gguf" -DGM_PYTHON="${GM_VENV:-$ROOT/.venv}/bin/python" >/dev/null
  cmake --build build-asan -j"$(nproc)"
  # tests/lsan.supp: third-party allocations only (OpenMPI, fontconfig), never gemma.c's. The full unwinder
  # (fast_unwind_on_malloc=0) lets OpenMPI leaks from components dlclose'd at MPI_Finalize reach a named
  # OpenMPI frame; with the fast one every MPI test fails on "<unknown module>" stacks.
  # GM_TEST_GREEDY_STEPS: the reference test's greedy continuations to their first 16 tokens here (decode
  # under ASan is most of this stage); the Release stage checks all 64.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 GM_SANITIZED=1 GM_TEST_GREEDY_STEPS=16 \
  LSAN_OPTIONS=suppressions="$ROOT/tests/lsan.supp":print_suppressions=0:fast_unwind_on_malloc=0 \
    ctest --test-dir build-asan --output-on-failure -j2 --timeout 1800
  stage_done "ASan + UBSan build and ctest"
fi

if [ "${GM_SKIP_FUZZ:-0}" != 1 ]; then
  # clang + libFuzzer, ASan + UBSan: each harness ${GM_FUZZ_SECONDS:-30} s on tests/fuzz/corpus/<name>/
  echo "== libFuzzer harnesses (build-fuzz), ${GM_FUZZ_SECONDS:-30} s each"
  GM_TEST_MODEL="$ROOT/models/gemma-3-270m-q4_k_m.gguf" bash scripts/fuzz.sh "${GM_FUZZ_SECONDS:-30}"
  stage_done "fuzz build and runs"
fi
echo "== all stages passed in $((SECONDS - T0)) s"
