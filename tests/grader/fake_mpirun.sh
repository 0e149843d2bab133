#!/bin/sh
# fake_mpirun.sh - stands in for mpirun in the engine's self-test (no MPI needed): drops
# the options up to and including "-np N", exports FAKE_NP=N, and runs the driver as one
# process in place of N ranks.
while [ $# -gt 0 ]; do
    case "$1" in
    -np) FAKE_NP=$2; export FAKE_NP; shift 2; break ;;
    *) shift ;;
    esac
done
exec "$@"
