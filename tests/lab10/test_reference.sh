#!/usr/bin/env bash
# tests/lab10/test_reference.sh - Lab 10's solution (ring attention and Ulysses, forward and
# backward) at 1, 2 and 4 ranks against references outside the kit: float64 attention in
# plain Python, and PyTorch's scaled_dot_product_attention where torch imports
# (tests/lab10/check_reference.py; the dump is `lab10 --run dump`). Then RUN=long at 1 and 4
# ranks through its table-and-plot script: the solution's peaks within 2% of the design's
# formula for the ring, Ulysses and the 2-D grid.
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
mkdir -p "$TMP/long"
for np in 1 4; do
    if ! timeout 120 $MPIRUN -np $np "$BIN" --run long -q >"$TMP/long/np$np.txt" 2>"$TMP/err$np"; then
        echo "not ok - lab10 --run long at $np rank(s): $(tail -n 2 "$TMP/err$np" | tr '\n' ' ')"
        rc=1
    fi
done
out=$(scripts/plot-lab10-long.sh "$TMP/long" 2>&1)
worst=$(awk '$1 == "longmem" {for (i = 4; i <= 8; i += 2) {split($i, m, "="); split($(i + 1), f, "="); if (f[2] > 0) {r = m[2] / f[2]; d = r > 1 ? r - 1 : 1 - r; if (d > w) w = d}}; k++} END {printf "%d %.4f", k, w}' "$TMP/long"/np*.txt)
if [ "${worst%% *}" -ge 6 ] && awk -v w="${worst#* }" 'BEGIN {exit !(w <= 0.02)}' && echo "$out" | grep -q "4 GPU(s): ring [0-9]*, Ulysses [0-9]*, 2-D grid"; then
    echo "ok - lab10 RUN=long: the solution's peak bytes per rank equal the design's formula within 2% (worst ${worst#* }) for the ring, Ulysses and the 2-D grid; the 80 GB table"
else
    echo "not ok - lab10 RUN=long: ${worst%% *} longmem lines, worst gap to the formula ${worst#* }: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
    rc=1
fi
exit $rc
