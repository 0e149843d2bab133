#!/usr/bin/env bash
# test_planner.sh - the 3D-parallelism planner's unit tests (tests/costmodel/test_planner.c)
# at 1 rank: formulas worked out by hand and the kit's kernel counts. Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-planner.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
BIN=build/cpu/tests/test_planner
if ! $MAKE --no-print-directory -s "$BIN" >"$TMP/build.log" 2>&1; then
    echo "not ok - planner tests build ($(grep -m1 -i error "$TMP/build.log"))"
    exit 1
fi
timeout 120 $MPIRUN -np 1 "$BIN" 2>"$TMP/err" | grep -E '^(ok|not ok) - '
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || echo "not ok - test_planner exited $rc: $(tail -n 2 "$TMP/err" | tr '\n' ' ')"
