#!/usr/bin/env bash
# gpu-validate.sh OUT_DIR [STEP...] - everything ParaLab can check on a machine with an
# NVIDIA GPU, in one go. Steps (default: all, in this order):
#   build    the cpu and cuda flavours, the cuda one for this GPU only
#   harness  harness tests on the cuda device: NCCL with one rank, the MPI comm backend
#            with 2 and 4 ranks sharing the GPU; the watchdog on cuda+mpi
#   kernels  the CUDA kernels against their CPU references; make bench-kernels
#   kernels  also the quantised (Q4_0, Q4_1, Q8_0), llama, MoE, ZeRO and flash (Lab 10)
#            kernels against theirs
#   labs     the solutions of Labs 0-10 graded through the referee and the player on the cuda
#            device: NCCL at 1 rank, the MPI comm backend at 2 and 4 ranks sharing the GPU
#            (Lab 2 also in TF32; Lab 5 on SmolLM2 when datasets/cache holds it, else on the
#            tiny llama), Lab 9's symmetric memory (NVSHMEM or CUDA IPC, as available), and
#            the Lab 1 starter (must score 0)
#   bench    Lab 2 GEMM efficiency and cost model, Lab 4 step time per schedule, Lab 5
#            tokens/s per split mode and its decode against the memory roofline (the
#            device copy's bandwidth over the bytes of weights a token reads), Lab 6, 7 and
#            9 step times, harness vs NCCL/cuBLAS
#   train    Lab 6 on Fashion-MNIST (1 rank NCCL; 2 ranks cuda+mpi), when the data is found
# Each check has its own time limit, so one that hangs costs only its own minutes, and the
# whole run a budget (GPU_BUDGET_S, default 570 s: device time is lent by the minute): a check
# the budget no longer covers is listed as not run. Full logs go to OUT_DIR; a short table is
# printed last (and saved as OUT_DIR/summary.txt) for docs/gpu-validation.md.
#
# Environment: NCCL_HOME=dir (include/ + lib/) when nccl.h is not in the CUDA toolkit (found
# by itself in the nvidia-nccl Python wheel); CUDA_ARCH (default: this GPU's, from
# nvidia-smi); FASHION_MNIST_DIR for the train step.
set -u
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/gpu-validate.sh OUT_DIR [build harness kernels labs bench train]}
shift
STEPS=${*:-build harness kernels labs bench train}
mkdir -p "$OUT"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
unset PL_DEVICE PL_COMM TRACE PL_TF32
SUMMARY=$OUT/summary.txt
touch "$SUMMARY"
row() { printf '%-62s %s\n' "$1" "$2" | tee -a "$SUMMARY"; }
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
logname() { echo "$OUT/$(echo "$1" | tr -c 'A-Za-z0-9.\n-' '_').log"; }
T0=$SECONDS
stamp() { echo "# [$((SECONDS - T0)) s] $*" | tee -a "$SUMMARY"; }
BUDGET=${GPU_BUDGET_S:-570}
# within SECONDS [COMMAND...]: the command under timeout, its limit cut to what the budget
# has left; exit 124 at once (and a line in the table) when that is under 5 s.
within() {
    local to=$1 left=$((BUDGET - (SECONDS - T0)))
    shift
    local what="$*"
    ((left < to)) && to=$left
    if ((to < 5)); then
        row "not run (the ${BUDGET} s budget is spent)" "${what:0:70}"
        return 124
    fi
    timeout "$to" "$@"
}

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || { echo "gpu-validate: nvidia-smi failed: no GPU here" >&2; exit 1; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '.')
ARCH=${CUDA_ARCH:-$cc}
if [ -z "${NCCL_HOME:-}" ] && ! [ -f "$(dirname "$(dirname "$(command -v nvcc)")")/include/nccl.h" ]; then
    d=$(python3 -c "import nvidia.nccl,os;print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)
    [ -n "$d" ] && [ -f "$d/include/nccl.h" ] && export NCCL_HOME=$d
fi
if want build; then
    row "GPU" "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1) (sm_$cc)"
    row "nvcc" "$(nvcc --version | tail -n 1)"
    row "NCCL headers" "${NCCL_HOME:-in the CUDA toolkit} (versions: doctor.log)"
    row "host" "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
fi

MK=(make --no-print-directory CUDA_ARCH="$ARCH" ${NCCL_HOME:+NCCL_HOME=$NCCL_HOME} FLAVOR=cuda)

if want build; then
    stamp build
    if "${MK[@]}" -j"$(nproc)" all test-bins kernel-tests build/cuda/bench/bench_gpu >"$OUT/build.log" 2>&1; then
        row "build (cpu + cuda flavours, sm_$ARCH)" "ok, nccl backend $(nm build/cuda/libparalab.a 2>/dev/null | grep -q ' pl_comm_nccl' && echo built || echo MISSING), $((SECONDS - T0)) s"
    else
        row "build (cpu + cuda flavours, sm_$ARCH)" "FAILED (see build.log)"; tail -n 30 "$OUT/build.log"; exit 1
    fi
    within 120 "${MK[@]}" doctor >"$OUT/doctor.log" 2>&1
    grep -iE 'nccl|driver' "$OUT/doctor.log" | head -n 3 | sed 's/^/    /' | tee -a "$SUMMARY"
fi

tap() { # tap LABEL TIMEOUT NP ARGS... : run a TAP-printing program, count ok / not ok
    local label=$1 to=$2 np=$3; shift 3
    local log; log=$(logname "$label")
    local s=$SECONDS
    within "$to" mpirun -np "$np" "$@" >"$log" 2>&1
    local rc=$? okc notc
    okc=$(grep -c '^ok - ' "$log"); notc=$(grep -c '^not ok - ' "$log")
    row "$label" "$okc ok, $notc not ok, exit $rc, $((SECONDS - s)) s"
    grep '^not ok - ' "$log" | head -n 5 | sed 's/^/    /' | tee -a "$SUMMARY"
}

if want harness; then
    stamp harness
    for t in test_rng test_gemm test_collectives test_streams; do
        tap "$t cuda+nccl np1" 120 1 build/cuda/tests/$t --device cuda --comm nccl
        tap "$t cuda+mpi np2" 180 2 build/cuda/tests/$t --device cuda --comm mpi
    done
    tap "test_collectives cuda+mpi np4" 240 4 build/cuda/tests/test_collectives --device cuda --comm mpi
    within 60 mpirun -np 2 build/cuda/tests/misbehave deadlock --device cuda --comm mpi --watchdog 3 >"$OUT/watchdog.log" 2>&1
    rc=$?
    row "watchdog on cuda+mpi, planted deadlock (want exit 86, 2 lines)" "exit $rc, $(grep -c 'waits in' "$OUT/watchdog.log") rank lines"
    within 60 mpirun -np 1 build/cuda/solutions/lab01 --device cuda --comm nccl -q -b 8 -e 8 >"$OUT/backends.log" 2>&1
    row "backends picked (np1, cuda+nccl)" "$(grep -m1 -o 'device [a-z]*, comm [a-z]*' "$OUT/backends.log")"
fi

if want kernels; then
    stamp kernels
    tap "kernels: CUDA vs CPU reference" 300 1 build/cuda/tests/test_kernels_cuda --device cuda
    for k in llama moe zero flash; do  # the quantised products are in the llama family's test
        tap "kernels ($k): CUDA vs CPU reference" 300 1 build/cuda/tests/test_kernels_${k}_cuda --device cuda
    done
    within 300 "${MK[@]}" bench-kernels >"$OUT/bench-kernels.log" 2>&1
    grep '^ratio' "$OUT/bench-kernels.log" | while IFS= read -r l; do row "bench-kernels" "$l"; done
fi

grade() { # grade LABEL TIMEOUT make-args...
    local label=$1 to=$2; shift 2
    local log; log=$(logname "$label")
    local s=$SECONDS
    within "$to" "${MK[@]}" "$@" >"$log" 2>&1
    local rc=$?
    row "$label" "$(grep '^score:' "$log" | tail -n 1), exit $rc, $((SECONDS - s)) s"
    grep -E '^ *(FAIL|fail|TIMEOUT|CRASH)' "$log" | head -n 5 | sed 's/^/    /' | tee -a "$SUMMARY"
}
if want labs; then
    stamp labs
    grade "lab 0 np1 cuda+nccl" 120 lab-0 NP=1 COMM=nccl
    grade "lab 0 np2,4 cuda+mpi" 200 lab-0 NP="2 4" COMM=mpi
    grade "lab 1 solution np1 cuda+nccl" 300 lab-1 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 1 solution np2,4 cuda+mpi" 400 lab-1 SOLUTION=1 NP="2 4" COMM=mpi
    grade "lab 1 starter np2 cuda+mpi (must be 0)" 200 lab-1 NP=2 COMM=mpi
    grade "lab 2 solution np1 cuda+nccl (fp32)" 300 lab-2 SOLUTION=1 NP=1 COMM=nccl
    PL_TF32=1 grade "lab 2 solution np1 cuda+nccl (PL_TF32=1)" 300 lab-2 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 2 solution np2,4 cuda+mpi" 400 lab-2 SOLUTION=1 NP="2 4" COMM=mpi
    PL_TF32=1 grade "lab 2 solution np2 cuda+mpi (PL_TF32=1)" 300 lab-2 SOLUTION=1 NP=2 COMM=mpi
    grade "lab 3 solution np1 cuda+nccl" 300 lab-3 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 3 solution np2,4 cuda+mpi" 400 lab-3 SOLUTION=1 NP="2 4" COMM=mpi
    grade "lab 4 solution np1 cuda+nccl" 300 lab-4 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 4 solution np2,4 cuda+mpi" 400 lab-4 SOLUTION=1 NP="2 4" COMM=mpi
    l5=(); [ -f datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf ] || l5=(RUBRIC_SCALE=1)
    grade "lab 5 solution np1 cuda+nccl${l5:+ (tiny llama)}" 300 lab-5 SOLUTION=1 NP=1 COMM=nccl "${l5[@]}"
    grade "lab 5 solution np2,4 cuda+mpi${l5:+ (tiny llama)}" 400 lab-5 SOLUTION=1 NP="2 4" COMM=mpi "${l5[@]}"
    grade "lab 6 solution np1 cuda+nccl" 300 lab-6 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 6 solution np2,4 cuda+mpi" 400 lab-6 SOLUTION=1 NP="2 4" COMM=mpi
    grade "lab 9 solution np1 cuda (nvshmem when installed)" 300 lab-9 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 9 solution np2,4 cuda (cuda-ipc: ranks share the GPU)" 400 lab-9 SOLUTION=1 NP="2 4" COMM=mpi
    for np in 1 2; do # which symmetric-memory implementation ran, in the driver's own words
        l=$(within 120 mpirun -np $np build/cuda/solutions/lab09 --device cuda --comm "$([ $np = 1 ] && echo nccl || echo mpi)" \
            --filter config.ok 2>&1 | grep -o 'symmetric memory [^;]*' | head -n 1)
        row "lab 9 np$np" "${l:-no line (did it start?)}"
    done
    grade "lab 8 solution np1 cuda+nccl" 300 lab-8 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 8 solution np2,4 cuda+mpi" 400 lab-8 SOLUTION=1 NP="2 4" COMM=mpi
    grade "lab 7 solution np1 cuda+nccl" 300 lab-7 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 7 solution np2,4 cuda+mpi" 400 lab-7 SOLUTION=1 NP="2 4" COMM=mpi
    grade "lab 10 solution np1 cuda+nccl" 200 lab-10 SOLUTION=1 NP=1 COMM=nccl
    grade "lab 10 solution np2,4 cuda+mpi" 300 lab-10 SOLUTION=1 NP="2 4" COMM=mpi
fi

comm_for() { [ "$1" = 1 ] && echo nccl || echo mpi; } # one GPU: NCCL only with one rank
if want bench; then
    stamp bench
    log=$OUT/bench-gpu.log
    within 300 mpirun -np 1 build/cuda/bench/bench_gpu >"$log" 2>&1
    grep -E '^(ratio|# bench_gpu)' "$log" | while IFS= read -r l; do row "bench_gpu" "$l"; done
    log=$OUT/bench-lab2.log
    : >"$log"
    for np in 1 2 4; do
        within 120 mpirun -np $np build/cuda/solutions/lab02 --device cuda --comm "$(comm_for $np)" \
            --run bench --gemm-shape 4096,4096,8192 -n 20 >>"$log" 2>&1
        within 120 mpirun -np $np build/cuda/solutions/lab02 --device cuda --comm "$(comm_for $np)" \
            --run scaling --shape 2048,4096,16384 -n 10 -w 2 >>"$log" 2>&1
    done
    grep -E '^(ratio|scaling)' "$log" | while IFS= read -r l; do row "lab2 cuda" "$l"; done
    log=$OUT/bench-lab4.log
    : >"$log"
    for np in 2 4; do
        within 200 mpirun -np $np build/cuda/solutions/lab04 --device cuda --comm mpi --run bench >>"$log" 2>&1
    done
    grep -E '^(ratio|bench)' "$log" | while IFS= read -r l; do row "lab4 cuda" "$l"; done
    log=$OUT/bench-lab5.log
    : >"$log"
    for np in 1 2 4; do
        within 300 mpirun -np $np build/cuda/solutions/lab05 --device cuda --comm "$(comm_for $np)" --run bench \
            >>"$log" 2>&1
    done
    grep -E '^(ratio|bench)' "$log" | while IFS= read -r l; do row "lab5 cuda" "$l"; done
    # decode against its roofline: the device copy's GB/s (bench-kernels) over the bytes of
    # weights one token reads (SmolLM2 as the file stores it: 96.6 MB; labs/05's handout)
    copy=$(sed -n 's/^# device-to-device copy: \([0-9.]*\) GB\/s.*/\1/p' "$OUT/bench-kernels.log" 2>/dev/null | head -n 1)
    dec=$(grep -m1 '^bench05 weights q' "$log" | sed -n 's/.*decode [0-9]* tokens *\([0-9.]*\) tok\/s.*/\1/p')
    if [ -n "$copy" ] && [ -n "$dec" ] && [ -f datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
        roof=$(awk -v c="$copy" 'BEGIN { printf "%.0f", c * 1e9 / 2 / 96.6e6 }')  # copy GB/s counts read + write
        row "lab 5 decode, quantised, np1 cuda vs the memory roof" \
            "$dec tok/s of $roof tok/s ($(awk -v d="$dec" -v r="$roof" 'BEGIN { printf "%.0f", 100 * d / r }') %; read bandwidth $(awk -v c="$copy" 'BEGIN { printf "%.0f", c / 2 }') GB/s)"
    else
        row "lab 5 decode vs the memory roof" "not computed (copy '${copy:-?}' GB/s, decode '${dec:-?}' tok/s, SmolLM2 $([ -f datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf ] && echo present || echo absent))"
    fi
    log=$OUT/bench-lab6.log
    : >"$log"
    for np in 1 2; do
        for h in 256 2048; do
            within 120 mpirun -np $np build/cuda/solutions/lab06 --device cuda --comm "$(comm_for $np)" \
                --run bench -n 20 --hidden $h --batch 256 >>"$log" 2>&1
        done
    done
    grep '^bench06' "$log" | while IFS= read -r l; do row "lab6 cuda" "$l"; done
    log=$OUT/bench-lab9.log
    : >"$log"
    for np in 1 2; do
        within 300 mpirun -np $np build/cuda/solutions/lab09 --device cuda --comm "$(comm_for $np)" --run bench >>"$log" 2>&1
    done
    grep -E '^ *(layer|crossover)|^# lab09 bench' "$log" | while IFS= read -r l; do row "lab9 cuda" "$l"; done
    log=$OUT/bench-lab7.log
    : >"$log"
    for np in 1 2; do
        within 300 mpirun -np $np build/cuda/solutions/lab07 --device cuda --comm "$(comm_for $np)" --run bench \
            >>"$log" 2>&1
    done
    grep '^bench07' "$log" | while IFS= read -r l; do row "lab7 cuda" "$l"; done
    within 300 "${MK[@]}" scaling LAB=2 SOLUTION=1 NP="1 2 4" >"$OUT/scaling-2.log" 2>&1
    row "make scaling LAB=2 (np 1 2 4), exit $?" "table in scaling-2.log"
fi

if want train; then
    stamp train
    if [ -n "${FASHION_MNIST_DIR:-}" ] || [ -d /usr/share/datasets/fashion-mnist ]; then
        for cfg in "1 nccl" "2 mpi"; do
            set -- $cfg
            log=$OUT/train-np$1.log
            within 300 mpirun -np "$1" build/cuda/solutions/lab06 --device cuda --comm "$2" --run train --epochs 5 \
                >"$log" 2>&1
            rc=$?
            row "lab 6 train np$1 cuda+$2, 5 epochs (exit $rc)" "$(grep '^epoch' "$log" | tail -n 1)"
        done
    else
        row "lab 6 train" "skipped: no Fashion-MNIST (set FASHION_MNIST_DIR)"
    fi
fi
stamp done
echo
cat "$SUMMARY"
