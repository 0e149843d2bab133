#!/usr/bin/env bash
# tests/lab10/test_reference.sh - Lab 10's solution (ring attention and Ulysses, forward and
# backward) at 1, 2 and 4 ranks against references outside the kit: float64 attention in
# plain Python, and PyTorch's scaled_dot_product_attention where torch imports
# (tests/lab10/check_reference.py; the dump is `lab10 --run dump`).
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
BIN=build/cpu/solutions/lab10
[ -x "$BIN" ] || { echo "not ok - $BIN is built (make)"; exit 1; }
TMP=$(mktemp -d /tmp/paralab-lab10.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
rc=0
for np in 1 2 4; do
    if ! timeout 120 $MPIRUN -np $np "$BIN" --run dump -q >"$TMP/dump$np" 2>"$TMP/err$np"; then
        echo "not ok - lab10 --run dump at $np rank(s): $(tail -n 2 "$TMP/err$np" | tr '\n' ' ')"
        rc=1
        continue
    fi
    ${PYTHON:-python3} tests/lab10/check_reference.py "$TMP/dump$np" || rc=1
done
exit $rc
