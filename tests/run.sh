#!/usr/bin/env bash
# tests/run.sh - ParaLab's own tests (called by `make test` after the build).
# Every check prints "ok - ..." or "not ok - ..."; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${HAVE_NVCC:=}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
unset PL_DEVICE PL_COMM TRACE
# the self-test's AddressSanitizer part is make test-asan (a minute and a half more)
export SELFTEST_ASAN=${SELFTEST_ASAN:-0}
export CLASS_LOAD=${CLASS_LOAD:-0} # test_class.sh without its run beside a CPU hog (make test-load runs it)

PASS=0 FAIL=0
TMP=$(mktemp -d /tmp/paralab-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
B=build/cpu
START=$SECONDS

pass() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }
expect() { # expect NAME CONDITION-COMMAND...
    local name=$1; shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}
section() { echo "# $* ($((SECONDS - START)) s)"; }

# Run an MPI test program that prints TAP-style lines; count each line, and fail the
# run itself when it exits non-zero or prints nothing.
tap_run() { # tap_run NP TIMEOUT BIN [ARGS...]
    local np=$1 to=$2; shift 2
    local out="$TMP/tap.out"
    timeout "$to" $MPIRUN -np "$np" "$@" >"$out" 2>"$TMP/tap.err"
    local rc=$?
    local lines=0
    while IFS= read -r line; do
        case "$line" in
            "ok - "*) pass "${TAP_PREFIX:-}${line#ok - }"; lines=$((lines + 1)) ;;
            "not ok - "*) fail "${TAP_PREFIX:-}${line#not ok - }"; lines=$((lines + 1)) ;;
        esac
    done <"$out"
    if [ $rc -ne 0 ] || [ $lines -eq 0 ]; then
        fail "$(basename "$1") at np $np exited with $rc after $lines check(s): $(tail -n 3 "$TMP/tap.err" | tr '\n' ' ')"
    fi
}

section "harness unit tests"
for np in 1 2 3 4 8; do tap_run "$np" 120 $B/tests/test_rng; done
tap_run 1 120 $B/tests/test_gemm
for np in 1 2 3 4 5 7; do tap_run "$np" 180 $B/tests/test_collectives; done
for np in 1 2 4; do tap_run "$np" 60 $B/tests/test_streams; done
for np in 1 2 3 4 8; do tap_run "$np" 120 $B/tests/test_sym; done
for np in 1 2 3; do tap_run "$np" 60 $B/tests/test_races; done
for np in 1 2; do tap_run "$np" 60 $B/tests/test_memcheck; done

section "watchdog, crashes, traces, errors"
for np in 2 3; do
    timeout 60 $MPIRUN -np $np $B/tests/misbehave deadlock --watchdog 2 >"$TMP/o" 2>"$TMP/e"
    rc=$?
    n=$(grep -c "waits in send for peer" "$TMP/e")
    expect "watchdog: planted send-before-recv deadlock at np $np exits 86 (got $rc) naming every rank ($n/$np)" \
        test "$rc" = 86 -a "$n" = "$np"
done
# the first waiting rank to give up aborts the job: on a loaded machine the other may be
# killed before it says so, so one of them is enough (and never the spinning rank 0)
timeout 60 $MPIRUN -np 3 $B/tests/misbehave hang --watchdog 1 >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "watchdog: ranks waiting for a spinning rank are reported (exit $rc)" \
    bash -c "[ $rc = 86 ] && grep -Eq 'rank [12] waits in recv for peer 0' $TMP/e && ! grep -q 'rank 0 waits' $TMP/e"
timeout 60 $MPIRUN -np 3 $B/tests/misbehave stuck-collective --watchdog 1 >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "watchdog: ranks blocked inside a library collective are reported (exit $rc)" \
    bash -c "[ $rc = 86 ] && grep -Eq 'rank [12] waits in allreduce' $TMP/e && ! grep -q 'rank 0 waits' $TMP/e"
timeout 60 $MPIRUN -np 3 $B/tests/test_sym lost-signal --watchdog 2 >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "watchdog: a rank waiting for a signal nobody sends is reported (exit $rc)" \
    bash -c "[ $rc = 86 ] && grep -q 'rank 0 waits in sym wait_until' $TMP/e"
timeout 60 $MPIRUN -np 2 $B/tests/test_sym bad-range >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "symmetric memory: a put past the end of an allocation is one explained line and exit 3 (got $rc)" \
    bash -c "[ $rc = 3 ] && grep -q 'pl_sym_put -> .*run past the end' $TMP/e"
timeout 60 $MPIRUN -np 2 $B/tests/test_sym bad-size >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "symmetric memory: ranks asking for different sizes is a usage error (exit $rc)" \
    bash -c "[ $rc = 2 ] && grep -q '^error: pl_sym_malloc: ranks ask for different sizes' $TMP/e"
for mode in slow slow-call slow-host; do # the verdict rests on progress: a rank that advances is no deadlock
    wd=1; [ $mode = slow-call ] && wd=0.2
    timeout 60 $MPIRUN -np 3 $B/tests/misbehave $mode --watchdog $wd >"$TMP/o" 2>"$TMP/e"
    rc=$?
    expect "watchdog: ranks waiting for a rank that still advances ($mode, watchdog $wd s) are not reported (exit $rc)" \
        bash -c "[ $rc = 0 ] && ! grep -q 'waits in' $TMP/e"
done
timeout 60 $MPIRUN -np 2 $B/tests/misbehave crash >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "crash: a segfaulting rank says 'crashed with signal 11' and the job fails (exit $rc)" \
    bash -c "[ $rc -ne 0 ] && grep -q 'rank 1\] crashed with signal 11' $TMP/e"
timeout 60 $MPIRUN -np 2 $B/tests/misbehave mismatch >"$TMP/o" 2>"$TMP/e"
expect "send/recv count mismatch: one explained line names rank, file, line and the cause" \
    grep -q "rank 1\] common/pl_comm_mpi.c:[0-9]*: recv -> .*same count" "$TMP/e"
for streams in eager deferred; do
    PL_STREAMS=$streams timeout 60 $MPIRUN -np 2 $B/tests/misbehave group-reuse >"$TMP/o" 2>"$TMP/e"
    rc=$?
    expect "a group that receives into memory it also sends from is refused, $streams streams (exit $rc)" \
        bash -c "[ $rc -ne 0 ] && grep -q 'pl_group_end -> receive 2 of this group writes memory that operation 1 of the same group sends from' $TMP/e"
done
timeout 60 $MPIRUN -np 2 $B/tests/misbehave trace --trace "$TMP/trace.json" >"$TMP/o" 2>"$TMP/e"
expect "trace: --trace writes a Chrome trace JSON with traceEvents" build/tools/jsoncheck "$TMP/trace.json" traceEvents
expect "trace: it holds send, recv, allreduce, gemm and the named region" \
    bash -c "for k in send recv allreduce gemm exchange; do grep -q \"\\\"name\\\":\\\"\$k\\\"\" $TMP/trace.json || exit 1; done"
TRACE=1 PL_TRACE_FILE="$TMP/t2.json" timeout 60 $MPIRUN -np 2 $B/tests/misbehave trace >"$TMP/o" 2>&1
expect "trace: TRACE=1 in the environment writes one too" build/tools/jsoncheck "$TMP/t2.json" traceEvents

# Bad input: one line starting "error:", exit code 2, no hang.
bad_input() { # bad_input NAME EXPECTED-TEXT NP ARGS...
    local name=$1 text=$2 np=$3; shift 3
    timeout 60 $MPIRUN -np "$np" "$@" >"$TMP/o" 2>"$TMP/e"
    local rc=$?
    local errs
    errs=$(grep -c "^error:" "$TMP/e")
    expect "bad input: $name -> exit 2 (got $rc), one 'error:' line (got $errs)" \
        bash -c "[ $rc = 2 ] && [ $errs = 1 ] && grep -q -- \"$text\" $TMP/e"
}
bad_input "unknown flag" "unknown flag '--bogus'" 2 $B/solutions/lab01 --bogus
bad_input "malformed size" "bad size '12Q'" 2 $B/solutions/lab01 -e 12Q
bad_input "size that overflows" "bad size" 2 $B/solutions/lab01 -e 99999999999999999999999
bad_input "-b larger than -e" "larger than -e" 2 $B/solutions/lab01 -b 1M -e 1K
bad_input "bad factor" "factor" 2 $B/solutions/lab01 -f 0.5
bad_input "unknown device" "unknown device 'tpu'" 2 $B/solutions/lab01 --device tpu
bad_input "cuda device in a cpu-only build" "device cuda requested" 2 $B/solutions/lab01 --device cuda
bad_input "nccl with the cpu device" "comm nccl requested" 2 $B/solutions/lab01 --device cpu --comm nccl
bad_input "PL_DEVICE=cuda in a cpu-only build" "device cuda requested" 1 env PL_DEVICE=cuda $B/solutions/lab01
bad_input "unknown collective" "unknown collective" 2 $B/solutions/lab01 --collective allfoo
bad_input "--calls out of range" "--calls: '5000' is not an integer in \\[0, 1024\\]" 1 $B/solutions/lab01 --calls 5000
# Timed runs in batches (docs/grader.md, "Batched timed runs"): Lab 9's timed 1 KiB all-reduce
# makes several calls per run (each checked: the fault batch_repeat), --calls 1 one
timeout 120 $MPIRUN -np 2 $B/solutions/lab09 --filter 'allreduce.oneshot.timed.*' -n 3 >"$TMP/o" 2>&1
k=$(awk '$2 == "allreduce.oneshot.timed.c256" {for (i = 1; i <= NF; i++) if ($i == "each" && $(i + 1) == "of") print $(i + 2)}' "$TMP/o")
expect "batched timing: Lab 9's 1 KiB all-reduce makes 2 to 1024 calls per timed run (${k:-none})" \
    bash -c "[ '${k:-0}' -ge 2 ] && [ '${k:-0}' -le 1024 ] && grep -q '^pass *allreduce.oneshot.timed.c256 ' $TMP/o"
timeout 120 $MPIRUN -np 2 $B/solutions/lab09 --filter 'allreduce.oneshot.timed.*' -n 3 --calls 1 >"$TMP/o" 2>&1
expect "batched timing: --calls 1 makes one call per run" grep -q "allreduce.oneshot.timed.c256 .*3 runs each of 1 call," "$TMP/o"
# T= with several globs (spaces or commas) selects what any of them matches; one that matches
# nothing says so instead of grading nothing in silence
n=$($B/solutions/lab01 --list --world 2 --filter 'broadcast.oop.r0.c0 reduce.oop.r0.c0,allgather.oop.c0' -b 0 -e 1 2>&1 | wc -l)
expect "filter: three globs, spaces and commas, select three cases (got $n)" test "$n" = 3
timeout 120 build/tools/pl-grade --lab 01-collectives --rubric grader/rubrics/01-collectives.rubric --driver $B/solutions/lab01 \
    --np 2 --filter 'no-such-case*' >"$TMP/o" 2>&1
expect "filter: T= that matches no case is a note saying so, and nothing runs" \
    bash -c "grep -q \"matches none of its cases: nothing ran\" $TMP/o && ! grep -q '^np 2: mpirun' $TMP/o"
timeout 60 $MAKE --no-print-directory lab-99 >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "bad input: make lab-99 names the labs and fails (exit $rc)" bash -c "[ $rc -ne 0 ] && grep -q 'no lab 99' $TMP/e"
for bad in abc 1x; do
    timeout 60 $MAKE --no-print-directory lab-$bad >"$TMP/o" 2>"$TMP/e"
    rc=$?
    expect "bad input: make lab-$bad is not a lab number: fails with one line, grades nothing (exit $rc)" \
        bash -c "[ $rc -ne 0 ] && grep -q 'wants a lab number' $TMP/e && ! grep -q '^score:' $TMP/o"
done
# A quote in T= reaches the grader as text, not as shell syntax: nothing matches it.
timeout 120 $MAKE --no-print-directory lab-0 NP=1 "T=it's" >"$TMP/o" 2>"$TMP/e"
rc=$?
expect "bad input: a quote in T= is a filter like any other (exit $rc, no shell error)" \
    bash -c "! grep -qi 'unexpected\|unterminated\|syntax error' $TMP/e && grep -q 'no cases ran' $TMP/o"

section "cuda flavour"
if [ -n "$HAVE_NVCC" ]; then
    expect "cuda flavour: harness, lab starter and solution compiled and linked with nvcc" \
        test -f build/cuda/libparalab.a -a -x build/cuda/labs/lab01 -a -x build/cuda/solutions/lab01
    expect "cuda flavour: the library holds the cuda device and nccl comm backends" \
        bash -c "nm build/cuda/libparalab.a | grep -q ' pl_device_cuda' && nm build/cuda/libparalab.a | grep -q ' pl_comm_nccl'"
    timeout 120 $MPIRUN -np 2 build/cuda/solutions/lab01 -b 0 -e 64K -f 16 -q >"$TMP/o" 2>"$TMP/e"
    rc=$?
    expect "cuda flavour without a GPU: auto falls back to the cpu (the referees move the messages) and the solution passes (exit $rc)" \
        bash -c "[ $rc = 0 ] && grep -q 'device cpu, comm referee' $TMP/o"
    bad_input "cuda flavour: --device cuda without a usable GPU" "device cuda requested" 1 build/cuda/solutions/lab01 --device cuda
    # The harness tests built against the cuda flavour run here on the cpu device.
    TAP_PREFIX="cuda build on the cpu device: " tap_run 2 120 build/cuda/tests/test_streams
    TAP_PREFIX="cuda build on the cpu device: " tap_run 3 180 build/cuda/tests/test_collectives
    TAP_PREFIX="cuda build on the cpu device: " tap_run 2 120 build/cuda/tests/test_races
else
    echo "# nvcc not found: cuda flavour not built (skipped, not counted)"
fi

for t in tests/*/test_*.sh; do
    [ -x "$t" ] || continue
    section "$(basename "$t")"
    tap_out="$TMP/$(basename "$t").out"
    MPIRUN="$MPIRUN" MAKE="$MAKE" timeout 900 "$t" >"$tap_out" 2>&1
    rc=$?
    lines=0
    while IFS= read -r line; do
        case "$line" in
            "ok - "*) pass "${line#ok - }"; lines=$((lines + 1)) ;;
            "not ok - "*|"FAIL - "*) fail "${line#* - }"; lines=$((lines + 1)) ;;
            "# "*) echo "$line" ;;
        esac
    done <"$tap_out"
    [ $rc -eq 0 ] && [ $lines -gt 0 ] || fail "$(basename "$t") exited with $rc after $lines check(s)"
done

echo "# total time $((SECONDS - START)) s"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
