#!/bin/sh
# test_engine.sh - self-test of the grading engine (pl-grade) without MPI: a fake mpirun
# runs a fake driver that misbehaves in every way the engine must survive, and each
# scenario's classification, score line, exit code and report files are checked.
#
#   tests/grader/test_engine.sh [PATH-TO-pl-grade]
#
# Without an argument the engine is compiled into a temporary directory first.
# Prints "ok - ..." / "FAIL - ..." per check; exits 1 if any check failed. Takes ~10 s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pl-grade-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

check() {  # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@" >/dev/null 2>&1; then
        echo "ok - $desc"
    else
        echo "FAIL - $desc"
        failures=$((failures + 1))
    fi
}

engine=${1:-}
if [ -z "$engine" ]; then
    engine=$tmp/pl-grade
    if ! gcc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE "$root"/grader/engine*.c -lcjson -o "$engine"; then
        echo "FAIL - the engine compiles without warnings"
        exit 1
    fi
    echo "ok - the engine compiles without warnings"
fi

# grade MODE [pl-grade options...]: run one scenario; output in $tmp/MODE.log, reports in
# $tmp/MODE/, exit status in $tmp/MODE.rc
grade() {
    mode=$1
    shift
    FAKE_MODE=$mode "$engine" --lab fake --rubric "$here/fake.rubric" --driver "$here/fake_driver.sh" \
        --mpirun "$here/fake_mpirun.sh --oversubscribe" --out "$tmp/$mode" "$@" >"$tmp/$mode.log" 2>&1
    echo $? >"$tmp/$mode.rc"
}
rc_is() { [ "$(cat "$tmp/$1.rc")" = "$2" ]; }
last_line_is() { [ "$(tail -n 1 "$tmp/$1.log")" = "$2" ]; }
has_line() { grep -Eq "$2" "$tmp/$1.log"; }
lacks_line() { ! grep -Eq "$2" "$tmp/$1.log"; }

json_valid() {
    if command -v jq >/dev/null; then jq -e . "$1"; else grep -q '^[[{]' "$1" && tail -n 1 "$1" | grep -q '^[]}]'; fi
}
xml_valid() {
    if command -v xmllint >/dev/null; then xmllint --noout "$1"; else grep -q '</testsuites>' "$1"; fi
}
reports_valid() {
    json_valid "$tmp/$1/results.json" && json_valid "$tmp/$1/cases.json" && xml_valid "$tmp/$1/junit.xml"
}
# results.json score equals the console score (jq when present, else a grep)
gradescope_score_is() {
    if command -v jq >/dev/null; then
        [ "$(jq -r '"\(.score)/\(.max_score)"' "$tmp/$1/results.json")" = "$2" ]
    else
        grep -q "\"score\":[[:space:]]*${2%/*}," "$tmp/$1/results.json"
    fi
}

# ---- all pass: full marks, exit 0
grade pass
check "pass: exit 0" rc_is pass 0
check "pass: score line" last_line_is pass "score: 35 / 35"
check "pass: one line per case with a running count" has_line pass "pass +np2/beta.c1M .*\[10/10 passed\]"
check "pass: bus bandwidth shown" has_line pass "busbw 1.25 GB/s \(lib 2.50\)"
check "pass: speed rule states ratio and target" has_line pass "speed 0.50 of library \(median of 2 cases >= 1M, target 0.25\)"
check "pass: reports are valid JSON/XML" reports_valid pass
check "pass: results.json score" gradescope_score_is pass "35/35"

# ---- a wrong result: index, expected, got; the parent gate zeroes the perf rules
grade wrong
check "wrong: exit 1" rc_is wrong 1
check "wrong: classified" has_line wrong "wrong +np1/alpha.c1024"
check "wrong: first wrong index, expected, got" has_line wrong "index 17: expected 3, got 5 \(12 of 1024 wrong\)"
check "wrong: perf gated by parent" has_line wrong "alpha.bytes +0/5 +parent alpha failed: 4/6 cases passed"
check "wrong: score line (a group scores only when all its cases pass)" last_line_is wrong "score: 15 / 35"
check "wrong: reports are valid" reports_valid wrong

# ---- a crash: marker shown, restart after the crashed case, later cases still graded
grade crash
check "crash: exit 1" rc_is crash 1
check "crash: classified with the marker" has_line crash "crash +np2/alpha.c1024"
check "crash: marker line shown" has_line crash "crashed with signal 11"
check "crash: restarted after the case" has_line crash "restarting np 2 after alpha.c1024"
check "crash: cases after it still ran" has_line crash "pass +np2/beta.c1M"
check "crash: score line" last_line_is crash "score: 15 / 35"
check "crash: reports are valid" reports_valid crash

# ---- a driver that ignores --start-after: the restart makes no progress and stops
grade crashloop --np 2
check "crashloop: stops when a restart makes no progress" has_line crashloop "crash +np2/\(run after alpha.c1024\)"
check "crashloop: exit 1" rc_is crashloop 1

# ---- an infinite loop: per-case timeout, the whole process group killed
start=$(date +%s)
grade loop --np 2
elapsed=$(($(date +%s) - start))
check "loop: classified as timeout" has_line loop "timeout +np2/alpha.c1024"
check "loop: killed within timeout + grace (${elapsed} s)" [ "$elapsed" -le 8 ]
check "loop: later cases still graded" has_line loop "pass +np2/beta.c0"
check "loop: no sleeping child left behind" sh -c "! pgrep -fx 'sleep 1000'"
check "loop: exit 1" rc_is loop 1

# ---- a deadlock: the watchdog's lines are shown
grade deadlock --np 2
check "deadlock: classified" has_line deadlock "deadlock +np2/alpha.c1024"
check "deadlock: watchdog lines shown" has_line deadlock "rank 1 waits in recv for peer 0"
check "deadlock: score line" last_line_is deadlock "score: 15 / 35"
check "deadlock: cases.json says deadlock" grep -q '"classification":[[:space:]]*"deadlock"' "$tmp/deadlock/cases.json"

# ---- megabytes of garbage on stdout and stderr: ignored, everything passes
grade garbage --np 2
check "garbage: full marks despite 6 MB of noise" last_line_is garbage "score: 35 / 35"
check "garbage: exit 0" rc_is garbage 0
check "garbage: reports are valid" reports_valid garbage

# ---- counted bytes: twice the optimum scores half the bytes rule
grade halfbytes --np 2
check "halfbytes: bytes rule at half" has_line halfbytes "alpha.bytes +2.5/5 +bytes 2.00x optimum, ratio 0.50 \(worst of 3 cases, target 1.00\)"
check "halfbytes: score line" last_line_is halfbytes "score: 32.5 / 35"

# ---- a library collective
grade forbidden --np 2
check "forbidden: classified with the message" has_line forbidden "called pl_allreduce"
check "forbidden: score line" last_line_is forbidden "score: 20 / 35"

# ---- the harness fails before any case: one failure in every group
grade fatal --np 2
check "fatal: whole run is an error" has_line fatal "error +np2/\(run\)"
check "fatal: harness message shown" has_line fatal "fatal harness error: .*cannot open the device"
check "fatal: score line" last_line_is fatal "score: 0 / 35"

# ---- a build error: every item 0, the compiler's first error line
grade build --build "echo compiling; echo 'lab.c:3:1: error: expected ;' >&2; echo 'lab.c:9:2: error: later'; exit 1"
check "build: exit 1" rc_is build 1
check "build: first error line" has_line build "build error lab.c:3:1: error: expected ;"
check "build: score line" last_line_is build "score: 0 / 35"
check "build: results.json all zero" gradescope_score_is build "0/35"
check "build: reports are valid" reports_valid build

# ---- --quiet, --filter, --test-scale, --device/--comm, and a hidden rubric with a run line
mkdir -p "$tmp/hidden"
printf 'lab fake\nrun np=2 label=seed7 --seed 7\ngroup seeds 5 np*@seed7/*\n' >"$tmp/hidden/fake.rubric"
FAKE_ARGS_LOG=$tmp/args.log grade options --quiet --filter 'alpha.*' --test-scale --device cpu --comm mpi \
    --hidden "$tmp/hidden"
check "quiet: no pass lines" lacks_line options "^  pass"
check "filter: passed to the driver" grep -q -- "--filter alpha.\*" "$tmp/args.log"
check "test-scale: test-args used" grep -q -- "-e 1K" "$tmp/args.log"
check "device/comm/watchdog passed" grep -q -- "--device cpu --comm mpi --watchdog 5" "$tmp/args.log"
check "hidden: extra run with its args" grep -q -- "--seed 7" "$tmp/args.log"
check "hidden: hidden group scored" has_line options "seeds +5/5 +3/3 cases \[hidden\]"
check "filter: unmatched group says no cases ran" has_line options "beta +0/10 +no cases ran"
check "options: score line" last_line_is options "score: 25 / 40"

# ---- a launcher that places the rank count itself: "srun -n {np}" style
FAKE_MODE=pass "$engine" --lab fake --rubric "$here/fake.rubric" --driver "$here/fake_driver.sh" \
    --mpirun "$here/fake_mpirun.sh -np {np}" --np 2 >"$tmp/npword.log" 2>&1
check "launcher with {np}: the rank count lands in its place" last_line_is npword "score: 35 / 35"

# ---- usage errors: one line, exit 2
"$engine" --lab fake >"$tmp/usage.log" 2>&1
echo $? >"$tmp/usage.rc"
check "usage: exit 2" rc_is usage 2
check "usage: one error line" has_line usage "^pl-grade: error: "
printf 'lab fake\nnp 1\nfrobnicate 3\n' >"$tmp/bad.rubric"
"$engine" --lab fake --rubric "$tmp/bad.rubric" --driver x >"$tmp/badrubric.log" 2>&1
echo $? >"$tmp/badrubric.rc"
check "bad rubric: exit 2 with file:line" sh -c "[ $(cat "$tmp/badrubric.rc") = 2 ] && grep -q 'bad.rubric:3: unknown directive' '$tmp/badrubric.log'"

# ---- the Lab 1 rubric parses and totals 100
"$engine" --lab 01-collectives --rubric "$root/grader/rubrics/01-collectives.rubric" --driver /bin/true \
    --mpirun "$here/fake_mpirun.sh" --np 1 >"$tmp/lab1.log" 2>&1
check "lab 1 rubric: 100 points" last_line_is lab1 "score: 0 / 100"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all checks passed"
