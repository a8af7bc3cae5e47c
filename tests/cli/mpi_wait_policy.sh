#!/usr/bin/env bash
# How MPI ranks wait (gm_mpi_wait_policy, gemma bench --json: mpi_yield_when_idle) on the real 270M: with the
# variable unset, the load sets OpenMPI's mpi_yield_when_idle to 0 (poll) when this host's ranks fit its CPUs
# and to 1 (yield) when they outnumber them; --wait yield asks for 1 and --wait spin for 0; a value the user set
# is kept; the policy never changes a token.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
command -v mpirun >/dev/null || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
unset OMPI_MCA_mpi_yield_when_idle
# MPI's components leak at MPI_Finalize under ASan (see comm_mpi.sh): no leak check for these runs.
[ "${GM_SANITIZED:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PY=${GM_PYTHON:-python3}
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; fi; }
bench() { # RANKS [env assignments...] -- ARGS...: "mpi_yield_when_idle last_token" from rank 0
  local np=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 300 mpirun -np "$np" "$GM_CLI" bench -m "$GM_TEST_MODEL" --cache-length 64 --prompt-tokens 8 \
    --gen-tokens 8 --devices 1 --json "$@" 2> "$T/err" |
    "$PY" -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d.get('mpi_yield_when_idle'), d['last_token'])"
}
cpus=$(nproc)
read -r y1 t1 <<< "$(bench 2 --)"
read -r y2 t2 <<< "$(bench 2 -- --wait yield)"
read -r y3 t3 <<< "$(bench 2 OMPI_MCA_mpi_yield_when_idle=1 --)"
read -r y4 t4 <<< "$(bench 2 -- --wait spin)"
want=$([ "$cpus" -ge 2 ] && echo 0 || echo 1)
check "2 ranks on $cpus CPUs: mpi_yield_when_idle $want ($y1)" '[ "$y1" = "$want" ] && [ -n "$t1" ]'
check "--wait yield: 1 ($y2)" '[ "$y2" = 1 ]'
check "the user's OMPI_MCA_mpi_yield_when_idle=1 is kept ($y3)" '[ "$y3" = 1 ]'
check "--wait spin: 0 ($y4)" '[ "$y4" = 0 ]'
# more ranks than CPUs: one more than the CPUs, on hosts small enough that this costs a few processes
t5=$t1
if [ "$cpus" -le 4 ]; then
  np=$((cpus + 1))
  read -r y5 t5 <<< "$(bench $np --)"
  check "$np ranks on $cpus CPUs: 1 ($y5)" '[ "$y5" = 1 ]'
else
  echo "skip more ranks than CPUs: $cpus CPUs would need $((cpus + 1)) ranks"
fi
check "the same tokens under every policy ($t1 $t2 $t3 $t4 $t5)" \
  '[ "$t2" = "$t1" ] && [ "$t3" = "$t1" ] && [ "$t4" = "$t1" ] && [ "$t5" = "$t1" ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
