#!/usr/bin/env bash
# Sets up (Debian packages, model, build) and runs the whole test suite: the Release build's ctest,
# then the same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/setup.sh
export GM_REQUIRE_MODEL=1
# MPI tests run several ranks on a 2-core machine, as root in CI.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

echo "== Release build: ctest"
ctest --test-dir build --output-on-failure -j2 --timeout 900

if [ "${GM_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan + UBSan build: ctest"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_SANITIZE=ON \
        -DGM_TEST_MODEL="$ROOT/models/gemma-3-270m-q4_k_m.gguf" -DGM_PYTHON="${GM_VENV:-$ROOT/.venv}/bin/python" >/dev/null
  cmake --build build-asan -j"$(nproc)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 GM_SANITIZED=1 \
  LSAN_OPTIONS=suppressions="$ROOT/tests/lsan.supp":print_suppressions=0 \
    ctest --test-dir build-asan --output-on-failure -j2 --timeout 1800
fi
