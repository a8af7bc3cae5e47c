#!/usr/bin/env bash
# The main job: set up (packages, the real Gemma 3 270M, build), show the FSDP plan, then chat with the
# model sharded over 4 devices: 2 MPI ranks x 2 in-process devices each. Pass a prompt as arguments
# for a one-shot answer; without one, chat line by line (interactive on a terminal).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
MODEL=models/gemma-3-270m-q4_k_m.gguf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 # mpi_yield_when_idle: the load chooses (gm_wait in gemma.h)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "== sharding plan (fsdp over 4 devices)"
build/gemma info -m "$MODEL" --devices 4 --sharding fsdp | awk '/^sharding/ || /^device/ || /token_embd|blk\.0\./'
echo
# each device's packed weights are kept in models/weight-cache (written on the first run, ~250 MB): later
# runs map them instead of packing the model again
CACHE=(--weight-cache models/weight-cache)
echo "== chat: 2 MPI ranks x 2 devices (mpirun -np 2 build/gemma chat --devices 2 ${CACHE[*]})"
if [ $# -gt 0 ]; then
  exec mpirun -np 2 --oversubscribe build/gemma chat -m "$MODEL" --devices 2 "${CACHE[@]}" --max-new-tokens 128 "$@"
elif [ -t 0 ]; then
  exec mpirun -np 2 --oversubscribe build/gemma chat -m "$MODEL" --devices 2 "${CACHE[@]}" --multi-turn --max-new-tokens 256
else
  exec mpirun -np 2 --oversubscribe build/gemma chat -m "$MODEL" --devices 2 "${CACHE[@]}" --max-new-tokens 128 \
    "Explain in two sentences why the sky is blue."
fi
