#!/usr/bin/env bash
# tests/bench.sh - `make bench`: measurements taken side by side in one run, printed as
# `ratio` lines with their targets. Nothing here is asserted: these machines are noisy.
set -u
cd "$(dirname "$0")/.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
B=build/cpu
echo "# make bench on $(nproc) core(s); ranks beyond that are oversubscribed"

echo "# harness overhead: pl_allreduce vs raw MPI_Allreduce (2 ranks)"
timeout 300 $MPIRUN -np 2 $B/bench/bench_allreduce 2>&1 | grep '^ratio'

echo "# pl_gemm vs raw cblas_sgemm (1 rank, 1 BLAS thread)"
timeout 300 $MPIRUN -np 1 $B/bench/bench_gemm 2>&1 | grep '^ratio'

if [ -x build/cuda/bench/bench_gpu ]; then
    echo "# GPU: pl_allreduce vs ncclAllReduce (1 rank), pl_gemm vs cublasSgemm"
    timeout 300 $MPIRUN -np 1 build/cuda/bench/bench_gpu 2>&1 | grep -E '^(ratio|# bench_gpu)'
fi

echo "# solution ring all-reduce vs library all-reduce, 64 MiB, 4 ranks"
out=$(timeout 600 $MPIRUN -np 4 $B/solutions/lab01 --collective allreduce_ring -b 64M -e 64M -n 5 2>&1)
echo "$out" | awk '$1=="allreduce_ring" && $2=="oop" && $5 > 0 {
    printf "ratio ring allreduce 64 MiB: library / solution  %6.3f   (solution %.0f us, library %.0f us, target >= 0.8)\n", $9/$5, $5, $9 }'

echo "# wall time of make lab-1"
tmp=$(mktemp -d)
tar --exclude=./build --exclude=./.git -cf - . | tar -C "$tmp" -xf -
( cd "$tmp" && s=$(date +%s.%N) && $MAKE --no-print-directory lab-1 NP=4 >/dev/null 2>&1; e=$(date +%s.%N)
  echo "time make lab-1 from clean (NP=4): $(echo "$e - $s" | bc) s"
  touch labs/01-collectives/collectives.c
  s=$(date +%s.%N); $MAKE --no-print-directory lab-1 NP=4 >/dev/null 2>&1; e=$(date +%s.%N)
  echo "time make lab-1 after touching collectives.c (NP=4): $(echo "$e - $s" | bc) s" )
rm -rf "$tmp"
