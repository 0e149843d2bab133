#!/usr/bin/env bash
# test_gpt_tp.sh - the tensor-parallel and the context-parallel GPT block (models/gpt_tp.h,
# models/gpt_cp.h) against the serial host block at 1, 2 and 4 ranks
# (tests/models/test_gpt_tp.c, tests/models/test_gpt_cp.c). Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
log=$(mktemp /tmp/gpt-tp.XXXXXX)
trap 'rm -f "$log"' EXIT
for name in test_gpt_tp test_gpt_cp; do
    BIN=$B/cpu/tests/$name
    if ! $MAKE --no-print-directory -s B="$B" "$BIN" >"$log" 2>&1; then
        echo "not ok - $name builds: $(grep -m1 -i error "$log")"
        continue
    fi
    for np in 1 2 4; do
        timeout 120 $MPIRUN -np $np "$BIN" >"$log" 2>&1
        rc=$?
        grep -E '^(ok|not ok) - ' "$log"
        [ $rc -eq 0 ] || echo "not ok - $name at np $np exited $rc: $(tail -n 2 "$log" | tr '\n' ' ')"
    done
done
