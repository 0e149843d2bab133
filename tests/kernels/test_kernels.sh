#!/usr/bin/env bash
# tests/kernels/test_kernels.sh - the kernels/ tests: CPU references vs float64 and finite
# differences (always), the CUDA versions vs the references (only where a GPU is present;
# the cuda program is otherwise only built, which checks that it compiles and links).
# Also builds and runs tests/kernels/test_kernels_ddp.c when it exists.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

if $MAKE --no-print-directory -s kernel-tests >/tmp/kernel-tests.$$.log 2>&1; then
    echo "ok - kernel test programs build (make kernel-tests)"
else
    echo "not ok - kernel test programs build: $(grep -m1 -i error /tmp/kernel-tests.$$.log)"
    rm -f /tmp/kernel-tests.$$.log
    exit 1
fi
rm -f /tmp/kernel-tests.$$.log

run_tap() { # run_tap BIN [ARGS...]: pass its ok/not ok lines through, fail if it exits non-zero
    local out rc
    out=$(timeout 120 $MPIRUN -np 1 "$@" 2>&1)
    rc=$?
    echo "$out" | grep -E '^(ok|not ok) - |^# '
    [ $rc -eq 0 ] || echo "not ok - $(basename "$1") exited with $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
}

run_tap build/cpu/tests/test_kernels
[ -x build/cpu/tests/test_kernels_ddp ] && run_tap build/cpu/tests/test_kernels_ddp
[ -x build/cpu/tests/test_kernels_llama ] && run_tap build/cpu/tests/test_kernels_llama
[ -x build/cpu/tests/test_kernels_flash ] && run_tap build/cpu/tests/test_kernels_flash
# the quantised products; their cases again against gguf-py's dequantiser where it imports
qcases=$(mktemp /tmp/paralab-quant.XXXXXX)
run_tap build/cpu/tests/test_kernels_quant --gguf-out "$qcases"
if ${PYTHON:-python3} -c "import gguf, numpy" >/dev/null 2>&1; then
    ${PYTHON:-python3} tests/kernels/check_quant_gguf.py "$qcases" || echo "not ok - check_quant_gguf.py exited non-zero"
else
    echo "# gguf-py not importable (pip install gguf): the quantised products are compared with the kit's own dequantiser only"
fi
rm -f "$qcases"

if [ -x build/cuda/tests/test_kernels_cuda ]; then
    echo "ok - cuda kernel test program compiles and links (build/cuda/tests/test_kernels_cuda)"
    if nvidia-smi -L 2>/dev/null | grep -q GPU; then
        run_tap build/cuda/tests/test_kernels_cuda --device cuda
        [ -x build/cuda/tests/test_kernels_ddp_cuda ] && run_tap build/cuda/tests/test_kernels_ddp_cuda --device cuda
        [ -x build/cuda/tests/test_kernels_llama_cuda ] && run_tap build/cuda/tests/test_kernels_llama_cuda --device cuda
        [ -x build/cuda/tests/test_kernels_moe_cuda ] && run_tap build/cuda/tests/test_kernels_moe_cuda --device cuda
        [ -x build/cuda/tests/test_kernels_flash_cuda ] && run_tap build/cuda/tests/test_kernels_flash_cuda --device cuda
    else
        echo "# no GPU: the CUDA kernels are compiled and linked, not run"
    fi
else
    echo "# nvcc not found: cuda kernel tests not built"
fi
exit 0
