# Sourced by the script tests in tests/cli/ that start MPI jobs: mpirun as root on a 2-core machine
# (oversubscribed ranks yield instead of spinning), no CMA single-copy (denied in some sandboxes), and
# slow unwinding under LSan so frames of OpenMPI's unloaded components get named and suppressed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}fast_unwind_on_malloc=0"
