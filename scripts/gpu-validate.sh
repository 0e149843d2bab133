#!/usr/bin/env bash
# gpu-validate.sh OUT_DIR - everything ParaLab can check on a machine with an NVIDIA GPU,
# in one go: build the cuda flavour for this GPU, run the harness tests on the cuda device
# (NCCL with one rank; the MPI comm backend with several ranks sharing the GPU), Lab 0 and
# Lab 1's solution through the grader, and the benchmarks. Full logs go to OUT_DIR; a short
# table is printed last (and saved as OUT_DIR/summary.txt) for docs/gpu-validation.md.
#
# Environment: NCCL_HOME=dir (include/ + lib/) when nccl.h is not in the CUDA toolkit;
# CUDA_ARCH (default: this GPU's, from nvidia-smi).
set -u
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/gpu-validate.sh OUT_DIR}
mkdir -p "$OUT"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
row() { printf '%-58s %s\n' "$1" "$2" | tee -a "$SUMMARY"; }

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || { echo "gpu-validate: nvidia-smi failed: no GPU here" >&2; exit 1; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '.')
ARCH=${CUDA_ARCH:-$cc}
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)
row "GPU" "$gpu (sm_$cc)"
row "nvcc" "$(nvcc --version | tail -n 1)"

MK=(make --no-print-directory CUDA_ARCH="$ARCH" ${NCCL_HOME:+NCCL_HOME=$NCCL_HOME} FLAVOR=cuda)
if "${MK[@]}" -j"$(nproc)" all test-bins >"$OUT/build.log" 2>&1; then row "build (cuda flavour, sm_$ARCH)" "ok"; else
    row "build (cuda flavour, sm_$ARCH)" "FAILED (see build.log)"; tail -n 20 "$OUT/build.log"; exit 1; fi

tap() { # tap LABEL NP ARGS... : run a harness test binary, count ok/not ok
    local label=$1 np=$2; shift 2
    local log="$OUT/$(echo "$label" | tr ' /' '__').log"
    timeout 300 mpirun -np "$np" "$@" >"$log" 2>&1
    local rc=$? okc notc
    okc=$(grep -c '^ok - ' "$log"); notc=$(grep -c '^not ok - ' "$log")
    row "$label" "$okc ok, $notc not ok, exit $rc"
}
for t in test_rng test_gemm test_collectives test_streams; do
    tap "$t cuda+nccl np1" 1 build/cuda/tests/$t --device cuda --comm nccl
    tap "$t cuda+mpi np2" 2 build/cuda/tests/$t --device cuda --comm mpi
done
tap "test_collectives cuda+mpi np4" 4 build/cuda/tests/test_collectives --device cuda --comm mpi
timeout 60 mpirun -np 2 build/cuda/tests/misbehave deadlock --device cuda --comm mpi --watchdog 3 >"$OUT/watchdog.log" 2>&1
row "watchdog on cuda+mpi (planted deadlock), exit" "$? ($(grep -c 'waits in' "$OUT/watchdog.log") rank lines)"

grade() { # grade LABEL make-args...
    local label=$1; shift
    local log="$OUT/$(echo "$label" | tr ' /=' '___').log"
    timeout 900 "${MK[@]}" "$@" >"$log" 2>&1
    row "$label" "$(tail -n 1 "$log")"
}
grade "lab 0 np1 cuda+nccl" lab-0 NP=1 COMM=nccl
grade "lab 0 np2 cuda+mpi" lab-0 NP=2 COMM=mpi
grade "lab 1 solution np1 cuda+nccl" lab-1 SOLUTION=1 NP=1 COMM=nccl
grade "lab 1 solution np2,4 cuda+mpi" lab-1 SOLUTION=1 NP="2 4" COMM=mpi
grade "lab 1 starter np2 cuda+mpi (must be 0)" lab-1 NP=2 COMM=mpi

grade "lab 2 solution np1 cuda+nccl (TF32)" lab-2 SOLUTION=1 NP=1 COMM=nccl
grade "lab 2 solution np2,4 cuda+mpi" lab-2 SOLUTION=1 NP="2 4" COMM=mpi
grade "lab 3 solution np1 cuda+nccl" lab-3 SOLUTION=1 NP=1 COMM=nccl
grade "lab 3 solution np2,4 cuda+mpi" lab-3 SOLUTION=1 NP="2 4" COMM=mpi
grade "lab 6 solution np1 cuda+nccl" lab-6 SOLUTION=1 NP=1 COMM=nccl
grade "lab 6 solution np2 cuda+mpi" lab-6 SOLUTION=1 NP=2 COMM=mpi
tap "kernels: CUDA vs CPU reference" 1 build/cuda/tests/test_kernels_cuda --device cuda
timeout 600 "${MK[@]}" bench-kernels >"$OUT/bench-kernels.log" 2>&1
grep '^ratio' "$OUT/bench-kernels.log" | while IFS= read -r l; do row "bench-kernels" "$l"; done
timeout 600 make --no-print-directory bench >"$OUT/bench.log" 2>&1
grep '^ratio' "$OUT/bench.log" | while IFS= read -r l; do row "bench" "$l"; done
echo
cat "$SUMMARY"
