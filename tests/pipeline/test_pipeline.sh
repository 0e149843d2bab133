#!/usr/bin/env bash
# tests/pipeline/test_pipeline.sh - Lab 4's modes and bad input, on the reference solution
# (its graded cases are the grader self-test's): the training run's two loss curves agree
# and fall, the sweep's clock matches the closed forms (scripts/plot-sweep-4.sh), the bench
# prints every schedule, TRACE=1 writes a trace per schedule, and bad flags or an
# unfinished lab end in one "error:" line. Prints ok / not ok lines.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
unset TRACE PL_TRACE_FILE
TMP=$(mktemp -d /tmp/paralab-pipeline.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
SOL=$B/cpu/solutions/lab04 START=$B/cpu/labs/lab04

check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok - $name"; else echo "not ok - $name"; fi
}

for kind in solutions labs; do
    bin=$B/cpu/$kind/lab04
    if ! $MAKE --no-print-directory -s B="$B" driver LAB=04-pipeline SRC=$kind/04-pipeline FLAVOR=cpu BIN="$bin" >"$TMP/build" 2>&1; then
        echo "not ok - lab 4 $kind driver builds: $(grep -m1 -i error "$TMP/build")"
        exit 1
    fi
done

# train: 20 steps at 2 stages, 1F1B and interleaved
timeout 300 $MPIRUN -np 2 "$SOL" --run train --steps 20 >"$TMP/train" 2>&1
rc=$?
first=$(awk '$1 == "train" && $3 == 0 {print $7}' "$TMP/train") last=$(awk '$1 == "train" && $3 == 19 {print $7}' "$TMP/train")
check "train, 1F1B at 2 stages: exit $rc, the pipeline's and the single rank's curves equal, loss $first -> $last" \
    bash -c "[ $rc = 0 ] && grep -q 'loss curves .*: equal' $TMP/train && awk 'BEGIN{exit !($last < $first - 1)}'"
timeout 300 $MPIRUN -np 2 "$SOL" --run train --steps 5 --schedule interleaved >"$TMP/train2" 2>&1
check "train, interleaved at 2 stages (v = 2): curves equal (exit $?)" grep -q 'loss curves .*: equal' "$TMP/train2"

# sweep: every schedule, m = 1, 2, 4, at 2 stages; the plot script checks the clock
mkdir -p "$TMP/sweep"
timeout 300 $MPIRUN -np 2 "$SOL" --run sweep --micro 4 >"$TMP/sweep/np2.txt" 2>&1
n=$(grep -c '^sweep ' "$TMP/sweep/np2.txt")
check "sweep at 2 stages: 11 lines (gpipe, 1f1b, zbh1 at m 1 2 4; interleaved at m 2 4), got $n" test "$n" = 11
scripts/plot-sweep-4.sh "$TMP/sweep" >"$TMP/plot" 2>&1
rc=$?
check "plot-sweep-4.sh: the clock equals the closed form on every line (exit $rc)" test "$rc" = 0
if command -v gnuplot >/dev/null 2>&1; then check "plot-sweep-4.sh wrote sweep.png" test -s "$TMP/sweep/sweep.png"; fi

# bench: one line per schedule
timeout 300 $MPIRUN -np 2 "$SOL" --run bench -n 1 >"$TMP/bench" 2>&1
n=$(grep -c '^bench04 np 2 sched .* pred_step_us [0-9]' "$TMP/bench")
check "bench at 2 stages: a line per schedule with its prediction ($n of 4)" test "$n" = 4

# TRACE=1: a Chrome trace per schedule run
( cd "$TMP" && TRACE=1 PL_TRACE_FILE="$TMP/t.json" timeout 120 $MPIRUN -np 2 "$OLDPWD/$SOL" --filter 'order.1f1b' -q >"$TMP/trace.out" 2>&1 )
check "TRACE=1: the 1F1B step as its own Chrome trace (trace events, gpt.block regions)" \
    bash -c "$B/tools/jsoncheck $TMP/t-1f1b.json traceEvents && grep -q 'gpt.block.BW' $TMP/t-1f1b.json"

# bad input: one line "error: ...", exit 2
bad() { # bad NAME TEXT NP BIN ARGS...
    local name=$1 text=$2 np=$3
    shift 3
    timeout 60 $MPIRUN -np "$np" "$@" >"$TMP/o" 2>"$TMP/e"
    local rc=$? errs
    errs=$(grep -c '^error:' "$TMP/e")
    check "bad input: $name -> exit 2 (got $rc), one 'error:' line (got $errs)" \
        bash -c "[ $rc = 2 ] && [ $errs = 1 ] && grep -q -- \"$text\" $TMP/e"
}
bad "more stages than blocks" "fewer than the 4 stages" 4 "$SOL" --layers 3
bad "unknown schedule" "--schedule 'fast'" 1 "$SOL" --run train --schedule fast
bad "a text that is not there" "cannot read it" 1 "$SOL" --run train --text /nonexistent/file.txt
bad "the starter's train mode" "not implemented yet" 2 "$START" --run train --steps 2
exit 0
