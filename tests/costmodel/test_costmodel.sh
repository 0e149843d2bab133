#!/usr/bin/env bash
# test_costmodel.sh - the cost model's unit tests (tests/costmodel/test_costmodel.c) at
# 1, 2 and 4 ranks, and the calibration tool on a Lab 0 sweep. Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-costmodel.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
BIN=build/cpu/tests/test_costmodel CAL=build/cpu/tools/pl-calibrate
if ! $MAKE --no-print-directory -s "$BIN" "$CAL" >"$TMP/build.log" 2>&1; then
    echo "not ok - cost model tests build ($(grep -m1 -i error "$TMP/build.log"))"
    exit 1
fi
for np in 1 2 4; do
    timeout 120 $MPIRUN -np $np "$BIN" 2>"$TMP/err" | grep -E '^(ok|not ok) - '
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || echo "not ok - test_costmodel at np $np exited $rc: $(tail -n 2 "$TMP/err" | tr '\n' ' ')"
done

# Calibration: a small Lab 0 sweep -> a profile that loads, with the measured numbers.
if timeout 120 $MPIRUN -np 2 build/cpu/labs/lab00 -b 8 -e 1M -f 32 -q --p2p-json "$TMP/p2p.json" >/dev/null 2>&1 &&
   timeout 120 $MPIRUN -np 1 "$CAL" --p2p-json "$TMP/p2p.json" --out "$TMP/m.profile" >"$TMP/cal.out" 2>&1; then
    if grep -q '^intra_bw_GBps' "$TMP/m.profile" && grep -q '^peak_tflops' "$TMP/m.profile" && grep -q '^vector_tflops' "$TMP/m.profile"; then
        echo "ok - pl-calibrate writes a profile from Lab 0's --p2p-json and a GEMM measurement, and it loads ($(grep -E '^(intra_latency_us|intra_bw_GBps|peak_tflops|vector_tflops)' "$TMP/m.profile" | awk '{printf "%s=%s ", $1, $2}'))"
    else
        echo "not ok - pl-calibrate wrote an incomplete profile"
    fi
else
    echo "not ok - pl-calibrate on a Lab 0 sweep ($(tail -n 1 "$TMP/cal.out" 2>/dev/null))"
fi
timeout 60 $MPIRUN -np 1 "$CAL" --p2p-json /nonexistent.json --out "$TMP/x.profile" >"$TMP/o" 2>"$TMP/e"
rc=$?
[ "$rc" = 2 ] && grep -q '^error:' "$TMP/e" && echo "ok - pl-calibrate: a missing sweep file is one error line, exit 2" \
    || echo "not ok - pl-calibrate: a missing sweep file is one error line, exit 2 (got $rc)"
