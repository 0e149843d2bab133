#!/usr/bin/env bash
# test_gpt_tp.sh - the tensor-parallel GPT block (models/gpt_tp.h) against the serial host
# block at t = 1, 2 and 4 ranks (tests/models/test_gpt_tp.c). Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
BIN=$B/cpu/tests/test_gpt_tp
log=$(mktemp /tmp/gpt-tp.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! $MAKE --no-print-directory -s B="$B" "$BIN" >"$log" 2>&1; then
    echo "not ok - test_gpt_tp builds: $(grep -m1 -i error "$log")"
    exit 1
fi
for np in 1 2 4; do
    timeout 120 $MPIRUN -np $np "$BIN" >"$log" 2>&1
    rc=$?
    grep -E '^(ok|not ok) - ' "$log"
    [ $rc -eq 0 ] || echo "not ok - test_gpt_tp at np $np exited $rc: $(tail -n 2 "$log" | tr '\n' ' ')"
done
