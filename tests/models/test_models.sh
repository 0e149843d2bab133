#!/usr/bin/env bash
# tests/models/test_models.sh - the models/ tests: the GPT-2 pipeline pieces against their
# host reference (np 1), the llama forward against a float64
# forward on a tiny random model (np 1), the same with real tensor parallelism (np 2), Lab 9's
# float64 mixture-of-experts layer and its kernels (np 1), and,
# when a SmolLM2 GGUF file is present, the real model. Prints the programs' ok / not ok
# lines (and their "# " notes); a program that exits non-zero is one more "not ok".
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

log=$(mktemp /tmp/model-tests.XXXXXX)
if $MAKE --no-print-directory -s B="$B" model-tests >"$log" 2>&1; then
    echo "ok - model test programs build (make model-tests)"
else
    echo "not ok - model test programs build: $(grep -m1 -i error "$log")"
    rm -f "$log"
    exit 1
fi
rm -f "$log"

run_tap() { # run_tap NP BIN [ARGS...]: pass its ok/not ok lines through, fail if it exits non-zero
    local np=$1 out rc
    shift
    out=$(timeout 120 $MPIRUN -np "$np" "$@" 2>&1)
    rc=$?
    echo "$out" | grep -E '^(ok|not ok) - |^# '
    [ $rc -eq 0 ] || echo "not ok - $(basename "$1") at np $np exited with $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
}

run_tap 1 "$B/cpu/tests/test_gpt"
run_tap 1 "$B/cpu/tests/test_llama"
run_tap 2 "$B/cpu/tests/test_llama"
run_tap 1 "$B/cpu/tests/test_moe"
[ -x "$B/cpu/tests/test_llama_gguf" ] && run_tap 1 "$B/cpu/tests/test_llama_gguf"
exit 0
