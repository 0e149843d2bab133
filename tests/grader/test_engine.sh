#!/bin/sh
# test_engine.sh - self-test of the grading engine (pl-grade) without MPI: a fake mpirun
# runs a fake driver (fake_driver.c, protocol 4) that misbehaves in every way the engine
# must survive or catch, and each scenario's classification, score line, exit code, report
# files and leftover processes are checked.
#
#   tests/grader/test_engine.sh [PATH-TO-pl-grade]
#
# Without an argument the engine is compiled into a temporary directory first; the fake
# driver always is. Prints "ok - ..." / "FAIL - ..." per check; exits 1 if any check
# failed. Takes ~30 s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pl-grade-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # a sandboxed run (uid 65534) must reach the fake driver
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
    if ! gcc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$root"/grader/runner "$root"/grader/engine/*.c -lcjson -o "$engine"; then
        echo "FAIL - the engine compiles without warnings"
        exit 1
    fi
    echo "ok - the engine compiles without warnings"
fi
mkdir -m 755 "$tmp/bin"
driver=$tmp/bin/fake_driver
if ! cc -std=c11 -O2 -Wall -Wextra -Werror "$here/fake_driver.c" -o "$driver"; then
    echo "FAIL - the fake driver compiles"
    exit 1
fi

# grade NAME [pl-grade options...]: run one scenario (fake driver mode NAME, or $MODE);
# output in $tmp/NAME.log, reports in $tmp/NAME/, exit status in $tmp/NAME.rc, seconds in
# $tmp/NAME.s
grade() {
    mode=$1
    shift
    start=$(date +%s)
    FAKE_MODE=${MODE:-$mode} FAKE_LOG=$tmp/$mode.fakelog FAKE_OUT=$tmp/$mode "$engine" --lab fake \
        --rubric "${RUBRIC:-$here/fake.rubric}" --driver "$driver" \
        --mpirun "$here/fake_mpirun.sh --oversubscribe" --out "$tmp/$mode" "$@" >"$tmp/$mode.log" 2>&1
    echo $? >"$tmp/$mode.rc"
    echo $(($(date +%s) - start)) >"$tmp/$mode.s"
}
rc_is() { [ "$(cat "$tmp/$1.rc")" = "$2" ]; }
took_at_most() { [ "$(cat "$tmp/$1.s")" -le "$2" ]; }
last_line_is() { [ "$(tail -n 1 "$tmp/$1.log")" = "$2" ]; }
has_line() { grep -Eq -- "$2" "$tmp/$1.log"; }
lacks_line() { ! grep -Eq -- "$2" "$tmp/$1.log"; }
log_has() { grep -Eq -- "$2" "$tmp/$1.fakelog"; }
no_leftovers() { ! pgrep -f "$driver" >/dev/null; }

# The validators are the real ones (scripts/install-deps.sh --tests installs them): without
# one, every check that needs it fails with the package to install.
need_tool() { command -v "$1" >/dev/null || { echo "not ok - $1 is needed to check the reports (apt-get install $2, or scripts/install-deps.sh --tests)"; return 1; }; }
json_valid() { need_tool jq jq >/dev/null && jq -e . "$1" >/dev/null; }
xml_valid() { need_tool xmllint libxml2-utils >/dev/null && xmllint --noout "$1"; }
reports_valid() {
    json_valid "$tmp/$1/results.json" && json_valid "$tmp/$1/cases.json" && xml_valid "$tmp/$1/junit.xml"
}
# results.json score equals the console score
gradescope_score_is() { need_tool jq jq >/dev/null && [ "$(jq -r '"\(.score)/\(.extra_data.max_score)"' "$tmp/$1/results.json")" = "$2" ]; }
need_tool jq jq
need_tool xmllint libxml2-utils
# exactly one line of the console starts with "score:", and it is the last one
one_score_line() { [ "$(grep -c '^score:' "$tmp/$1.log")" = 1 ] && tail -n 1 "$tmp/$1.log" | grep -q '^score:'; }

# ---- all pass: full marks, exit 0
grade pass
check "pass: exit 0" rc_is pass 0
check "pass: score line" last_line_is pass "score: 35 / 35"
check "pass: one line per case with a running count" has_line pass "pass +np2/beta.c1M .*\[10/10 passed\]"
check "pass: bus bandwidth shown" has_line pass "busbw 1.25 GB/s \(lib 2.50\)"
check "pass: speed rule states ratio and target" has_line pass "speed 0.50 of library \(median of 2 cases >= 1M, target 0.25\)"
check "pass: reports are valid JSON/XML" reports_valid pass
check "pass: results.json score" gradescope_score_is pass "35/35"
check "pass: cases.json has the plan's group" grep -q '"group":[[:space:]]*"beta"' "$tmp/pass/cases.json"

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
shm_left() {  # the directory the crashed run left under its tag is gone after the run
    local d
    d=$(awk '/^shm left: .* made$/ {print $3; exit}' "$tmp/crash.fakelog" 2>/dev/null)
    [ -n "$d" ] && case "$d" in /dev/shm/paralab-zero.*.fake) ! [ -e "$d" ] ;; *) false ;; esac
}
check "crash: what the run left in /dev/shm under its tag is removed after it" shm_left
check "crash: reports are valid" reports_valid crash

# ---- the launch is not a case: a plan later than the rubric's timeout (2 s) still counts
grade slowstart --np 2
check "slowstart: a plan 3 s after the launch, with timeout 2: every case graded" last_line_is slowstart "score: 35 / 35"
check "slowstart: no timeout" sh -c "! grep -q '^ *timeout ' '$tmp/slowstart.log'"

# ---- a restart that fails before its first case is tried once more, and only once
grade restartflake --np 2
check "restartflake: the failed restart is noted and tried again" has_line restartflake "the restart ended before its first case.*trying it once more"
check "restartflake: the cases after the crash still ran" has_line restartflake "pass +np2/beta.c1M"
check "restartflake: score line as for crash" last_line_is restartflake "score: 15 / 35"
grade restartdead --np 2
check "restartdead: tried twice, then the rest is closed with the restart's reason" \
    has_line restartdead "not run: the restart ended before its first case"
check "restartdead: one more try, not more" sh -c "[ \$(grep -c 'trying it once more' '$tmp/restartdead.log') = 1 ]"
check "restartdead: exit 1" rc_is restartdead 1

# ---- a driver that ignores --start-after: its restart announces the wrong plan
grade crashloop --np 2
check "crashloop: the restart's plan is refused" has_line crashloop "tampered +np2/alpha.c1M"
check "crashloop: the reason names the plan" has_line crashloop "restart's plan is not the rest of the first plan"
check "crashloop: the rest is missing" has_line crashloop "missing +np2/beta.c1M"
check "crashloop: exit 1" rc_is crashloop 1

# ---- an infinite loop: per-case timeout, the whole process group killed
grade loop --np 2
check "loop: classified as timeout" has_line loop "timeout +np2/alpha.c1024"
check "loop: killed within timeout + grace ($(cat "$tmp/loop.s") s)" took_at_most loop 8
check "loop: later cases still graded" has_line loop "pass +np2/beta.c0"
check "loop: no process left behind" no_leftovers
check "loop: exit 1" rc_is loop 1

# ---- junk on stdout/stderr every 0.5 s does not keep a hung case alive
grade junkhang --np 2
check "junkhang: still a timeout" has_line junkhang "timeout +np2/alpha.c1024"
check "junkhang: within timeout + grace ($(cat "$tmp/junkhang.s") s)" took_at_most junkhang 8

# ---- a hang between cases: the restart picks up after the last result
grade betweenhang --np 2
check "betweenhang: noted" has_line betweenhang "stopped between cases"
check "betweenhang: every case still graded" last_line_is betweenhang "score: 35 / 35"

# ---- every case hangs: run-timeout is one budget over all the restarts
printf 'timeout 2\nrun-timeout 3\n' | cat "$here/fake.rubric" - >"$tmp/short.rubric"
RUBRIC=$tmp/short.rubric grade hangall --np 2
check "hangall: the budget is shared by the restarts ($(cat "$tmp/hangall.s") s)" took_at_most hangall 7
check "hangall: cases past the budget are timeouts" has_line hangall "used up its run-timeout"
check "hangall: every planned case is classified" sh -c "[ \$(grep -c '\"classification\"' '$tmp/hangall/cases.json') = 5 ]"

# ---- a deadlock: the watchdog's lines are shown
grade deadlock --np 2
check "deadlock: classified" has_line deadlock "deadlock +np2/alpha.c1024"
check "deadlock: watchdog lines shown" has_line deadlock "rank 1 waits in recv for peer 0"
check "deadlock: score line" last_line_is deadlock "score: 15 / 35"
check "deadlock: cases.json says deadlock" grep -q '"classification":[[:space:]]*"deadlock"' "$tmp/deadlock/cases.json"

# ---- one group always deadlocks: it alone is given up, the other keeps its points
grade groupdeadlock
check "groupdeadlock: three in a row give up the group" has_line groupdeadlock "skipped: 3 cases of group alpha in a row ended in a deadlock"
check "groupdeadlock: the restart skips the group" has_line groupdeadlock "deadlock +np2/alpha.c8M"
check "groupdeadlock: the other group keeps full points" has_line groupdeadlock "beta +10/10"
check "groupdeadlock: score line" last_line_is groupdeadlock "score: 15 / 35"

# ---- megabytes of garbage on stdout and stderr: ignored, everything passes
grade garbage --np 2
check "garbage: full marks despite 6 MB of noise" last_line_is garbage "score: 35 / 35"
check "garbage: exit 0" rc_is garbage 0
check "garbage: reports are valid" reports_valid garbage

# ---- records and a score line forged on stdout count for nothing
grade stdoutforge --np 2
check "stdoutforge: the driver's verdict stands" has_line stdoutforge "wrong +np2/alpha.c1024"
check "stdoutforge: score line" last_line_is stdoutforge "score: 15 / 35"

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
check "fatal: every planned case is an error (the plan is the engine's)" has_line fatal "error +np2/beta.c1M"
check "fatal: harness message shown" has_line fatal "fatal harness error: .*cannot open the device"
check "fatal: score line" last_line_is fatal "score: 0 / 35"

# ---- the reason of a failure is an error line, never mpirun's banner
grade banner --np 2
check "banner: the error line is the reason" has_line banner "exited with code 5 .*error: the harness lost its device"
check "banner: no line of dashes as a reason" lacks_line banner "before finishing its cases: -----"

# ---- forged, duplicated, out-of-order and unplanned records: tampered, the rest missing
grade forged --np 2
check "forged: the running case is tampered" has_line forged "tampered +np2/alpha.c1024"
check "forged: the reason" has_line forged "a result for 'beta.c0' while alpha.c1024 is running"
check "forged: the rest is missing" has_line forged "missing +np2/beta.c0"
check "forged: score line" last_line_is forged "score: 0 / 35"
grade duplicate --np 2
check "duplicate: the case is revised to tampered" has_line duplicate "tampered +np2/alpha.c1024 .*\(revised\)"
check "duplicate: score line" last_line_is duplicate "score: 0 / 35"
grade forgedlast --np 2
check "forgedlast: a forged pass of the last case is revised" has_line forgedlast "tampered +np2/beta.c1M .*\(revised\)"
check "forgedlast: beta scores 0" has_line forgedlast "beta +0/10"
grade outoforder --np 2
check "outoforder: tampered" has_line outoforder "tampered +np2/alpha.c1024"
check "outoforder: the reason" has_line outoforder "begin of 'beta.c0' when the next planned case is alpha.c1024"
grade unplanned --np 2
check "unplanned: tampered" has_line unplanned "tampered +np2/alpha.c1024"
check "unplanned: exit 1" rc_is unplanned 1
grade junkline --np 2
check "junkline: a line that is not a record is tampering" has_line junkline "tampered +np2/alpha.c0 .*"
check "junkline: the reason" has_line junkline "a line that is not a JSON object"
check "junkline: score line" last_line_is junkline "score: 0 / 35"

# ---- 300 000 records: cut off at the plan's line budget, fast
grade flood --np 2
check "flood: tampered" has_line flood "tampered +np2/alpha.c0"
check "flood: cut off in well under 10 s ($(cat "$tmp/flood.s") s)" took_at_most flood 3
check "flood: no process left behind" no_leftovers

# ---- the key, the lab and the one connection
grade unsigned --np 2
check "unsigned: a record without the run's signature is tampering" has_line unsigned "tampered +np2/alpha.c1024 .*"
check "unsigned: the reason" has_line unsigned "does not carry this run's signature"
check "unsigned: alpha scores 0" has_line unsigned "alpha +0/10"

grade wrongkey
check "wrongkey: the run is tampered (the plan is the engine's: its first case)" has_line wrongkey "tampered +np1/alpha.c0"
check "wrongkey: the reason" has_line wrongkey "does not carry this run's signature"
check "wrongkey: score line" last_line_is wrongkey "score: 0 / 35"
grade wronglab --np 2
check "wronglab: tampered" has_line wronglab "tampered +np2/alpha.c0 .*"
check "wronglab: the reason" has_line wronglab "the driver is for lab 'other', not 'fake'"
grade secondconn --np 2
check "secondconn: a connection that says no hello is tampering" has_line secondconn "tampered +np2/alpha.c0 .*"
check "secondconn: the reason" has_line secondconn "not a referee's hello"
grade lateconn --np 2
check "lateconn: once every rank has its key, nobody can connect" log_has lateconn "late connect: refused"
check "lateconn: the run goes on (full marks)" last_line_is lateconn "score: 35 / 35"
grade nosecret --np 2
check "nosecret: hellos without the run's secret are tampering (one host)" has_line nosecret "tampered +np2/alpha.c0 .*"
check "nosecret: the reason" has_line nosecret "does not answer its challenge with the run's secret"
grade stranger --np 2
check "stranger: on a Unix socket, a connection without the secret is tampering" has_line stranger "tampered +np2/alpha.c0 .*"
grade stranger --np 2 --engine-addr 127.0.0.1
mv "$tmp/stranger.log" "$tmp/stranger-tcp.log"
check "stranger over TCP: the run goes on (full marks)" last_line_is stranger-tcp "score: 35 / 35"
check "stranger over TCP: the stranger's connection is closed and counted" has_line stranger-tcp "1 connection\\(s\\) to 127.0.0.1:[0-9]+ without the run's secret were closed"
grade tcp --np 2 --engine-addr 127.0.0.1
check "tcp: a run over TCP scores as over the Unix socket" last_line_is tcp "score: 35 / 35"
check "tcp: the report names the ranks' host and their referee's uid" has_line tcp "the ranks ran on fake \\(ranks 0,1; referee uid [0-9]+\\) \\(channel 127.0.0.1:[0-9]+\\)"
grade tcpbad --np 2 --engine-addr 203.0.113.1
check "tcp: an address that is not this host's: a usage error" rc_is tcpbad 2
check "tcp: ... which says what to give" has_line tcpbad "PL_ENGINE_ADDR=203.0.113.1: cannot listen there .*give an address of this host"
grade tcpsandbox --np 2 --engine-addr 127.0.0.1 --sandbox on
check "tcp: --sandbox on with hosts: a usage error naming the choice" has_line tcpsandbox "use --sandbox auto or off"
grade dupehello --np 2
check "dupehello: two hellos as one rank are tampering" has_line dupehello "tampered +np2/alpha.c0 .*"
check "dupehello: the reason" has_line dupehello "two connections say hello as rank 0"
grade abort --np 2
check "abort: another rank's referee stops the run: tampered" has_line abort "tampered +np2/alpha.c1024 .*"
check "abort: its reason reaches the report" has_line abort "rank 1's referee stopped the run: the player answered"
grade abortfirst --np 2
check "abortfirst: the abort's own case is tampered, though rank 0 is still before it" has_line abortfirst "tampered +np2/alpha.c1024 .*"
check "abortfirst: the case rank 0 was in is not blamed" sh -c "! grep -Eq 'tampered +np2/alpha.c0 ' '$tmp/abortfirst.log'"
grade otherrecord --np 2
check "otherrecord: another rank may send nothing but abort" has_line otherrecord "tampered +np2/alpha.c1024 .*"
check "otherrecord: the reason" has_line otherrecord "rank 1's referee sent a record other than abort"

# ---- escape codes, a line break with a score line, XML-invalid characters, bad UTF-8
grade escape --np 2
check "escape: classified wrong" has_line escape "wrong +np2/alpha.c1024"
check "escape: no escape byte reaches the console" sh -c "! grep -q \"\$(printf '\\033')\" '$tmp/escape.log'"
check "escape: no carriage return reaches the console" sh -c "! grep -q \"\$(printf '\\r')\" '$tmp/escape.log'"
check "escape: the only score line is the engine's, last" one_score_line escape
check "escape: the message stays on its indented line" has_line escape "^ {14}.*red.*score: 100 / 100"
check "escape: junit.xml is valid XML" xml_valid "$tmp/escape/junit.xml"
check "escape: results.json and cases.json are valid JSON" reports_valid escape

# ---- an end record before every planned case ran: missing
grade earlyend --np 2
check "earlyend: unrun cases are missing" has_line earlyend "missing +np2/beta.c0"
check "earlyend: the reason" has_line earlyend "the driver ended without running this case"
check "earlyend: score line" last_line_is earlyend "score: 20 / 35"

# ---- processes and files: orphans are killed before anything is written
grade orphan --np 2
check "orphan: killed and reported" has_line orphan "killed 1 leftover process"
check "orphan: none left behind" no_leftovers
grade rewrite --np 2
sleep 4  # the child would have rewritten results.json by now
check "rewrite: results.json is the engine's, intact" gradescope_score_is rewrite "35/35"
check "rewrite: none left behind" no_leftovers
grade bigfile --np 2
check "bigfile: a write over the file size limit kills the case" has_line bigfile "crash +np2/alpha.c1024"
check "bigfile: the signal is named" has_line bigfile "File size limit exceeded"

# ---- reports through planted symlinks: replaced, never followed; a symlinked --out refused
mkdir -p "$tmp/planted"
echo "keep" >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/planted/results.json"
FAKE_MODE=pass "$engine" --lab fake --rubric "$here/fake.rubric" --driver "$driver" --np 1 \
    --mpirun "$here/fake_mpirun.sh" --out "$tmp/planted" >"$tmp/planted.log" 2>&1
check "symlink: the planted link is replaced by the report" sh -c "[ ! -L '$tmp/planted/results.json' ] && jq -e .score '$tmp/planted/results.json'"
check "symlink: its target is untouched" sh -c "[ \"\$(cat '$tmp/victim')\" = keep ]"
ln -s "$tmp/planted" "$tmp/outlink"
"$engine" --lab fake --rubric "$here/fake.rubric" --driver "$driver" --np 1 \
    --mpirun "$here/fake_mpirun.sh" --out "$tmp/outlink" >"$tmp/outlink.log" 2>&1
echo $? >"$tmp/outlink.rc"
check "symlink: a symlinked --out is refused with one line, exit 2" \
    sh -c "[ \$(cat '$tmp/outlink.rc') = 2 ] && [ \$(wc -l <'$tmp/outlink.log') = 1 ] && grep -q 'symbolic link' '$tmp/outlink.log'"

# ---- a build error, and a build the object checker refused
MODE=pass grade build --build "echo compiling; echo 'lab.c:3:1: error: expected ;' >&2; echo 'lab.c:9:2: error: later'; exit 1"
check "build: exit 1" rc_is build 1
check "build: first error line" has_line build "build error lab.c:3:1: error: expected ;"
check "build: score line" last_line_is build "score: 0 / 35"
check "build: results.json all zero" gradescope_score_is build "0/35"
check "build: reports are valid" reports_valid build
MODE=pass grade objcheck --build "echo 'forbidden: labs/x/x.c calls MPI_Allreduce (MPI directly; use the harness)'; exit 1"
check "objcheck: classified forbidden at build" has_line objcheck "forbidden at build labs/x/x.c calls MPI_Allreduce"
check "objcheck: cases.json says forbidden" grep -q '"classification":[[:space:]]*"forbidden"' "$tmp/objcheck/cases.json"
check "objcheck: score line" last_line_is objcheck "score: 0 / 35"
MODE=pass grade buildhang --build "sleep 30" --build-timeout 1
check "build-timeout: the build is stopped ($(cat "$tmp/buildhang.s") s)" took_at_most buildhang 5
check "build-timeout: said so" has_line buildhang "longer than 1 s"

# ---- --quiet, --filter, --test-scale, --device/--comm, and a hidden rubric with run lines
mkdir -p "$tmp/hidden"
printf 'lab fake\nrun np=2 label=seed7 --seed 7\nrun np=2 label=seed13 --seed 13\ngroup seeds 5 np*@seed7/*\n' \
    >"$tmp/hidden/fake.rubric"
MODE=pass FAKE_ARGS_LOG=$tmp/args.log grade options --quiet --filter 'alpha.*' --test-scale --device cpu --comm mpi \
    --hidden "$tmp/hidden"
check "quiet: no pass lines" lacks_line options "^  pass"
check "filter: passed to the driver" grep -q -- "--filter alpha.\*" "$tmp/args.log"
check "test-scale: test-args used" grep -q -- "-e 1K" "$tmp/args.log"
check "device/comm/watchdog passed" grep -q -- "--device cpu --comm mpi --watchdog 5" "$tmp/args.log"
check "hidden: extra run with its args" grep -q -- "--seed 7" "$tmp/args.log"
check "hidden: hidden group scored" has_line options "seeds +5/5 +3/3 cases \[hidden\]"
check "filter: unmatched group says no cases ran" has_line options "beta +0/10 +no cases ran"
check "hidden: no hidden case on the console" lacks_line options "@seed"
check "hidden: no hidden command line on the console" lacks_line options "--seed"
check "hidden: a public item says only how many hidden cases failed" has_line options "alpha +0/10 +.*1 hidden case\(s\) failed"
check "hidden: results.json withholds hidden items" \
    sh -c "jq -e '.tests[] | select(.name == \"seeds\") | .visibility == \"after_published\"' '$tmp/options/results.json'"
check "hidden: no hidden case name in a public item" \
    sh -c "! jq -r '.tests[] | select(.visibility == null) | .output' '$tmp/options/results.json' | grep -q '@seed'"
check "hidden: hidden failures go to a withheld test" \
    sh -c "jq -e '.tests[] | select(.name == \"alpha: hidden cases\") | (.visibility == \"after_published\") and (.output | test(\"seed13/alpha.c1024\"))' '$tmp/options/results.json'"
check "hidden: cases.json keeps every hidden case" grep -q 'np2@seed13/alpha.c1024' "$tmp/options/cases.json"
check "options: score line (a filtered run says it is partial)" last_line_is options "score: 5 / 40 (partial: only the cases T='alpha.*' selects ran)"
MODE=pass grade hiddenrun --np 2 --hidden "$tmp/hidden"
check "hidden: one line per hidden run" has_line hiddenrun "^hidden run seed13 at np 2: 5 cases, 4 passed$"
check "hidden: still no hidden case or command line" lacks_line hiddenrun "@seed|--seed"
mkdir -p "$tmp/hiddendir/fake.rubric"
"$engine" --lab fake --rubric "$here/fake.rubric" --driver "$driver" --hidden "$tmp/hiddendir" >"$tmp/hiddendir.log" 2>&1
echo $? >"$tmp/hiddendir.rc"
check "hidden: a hidden rubric that is a directory is an error, exit 2" \
    sh -c "[ \$(cat '$tmp/hiddendir.rc') = 2 ] && grep -q 'not a regular file' '$tmp/hiddendir.log'"

# ---- what a rank can read about the engine from /proc (default mode)
HIDDEN=$tmp/hidden grade peek --np 1 --hidden "$tmp/hidden"
check "peek: the engine is the driver's parent here" grep -q "parent cmdline: \\[[^]]*$(basename "$engine")" "$tmp/peek/cases.json"
check "peek: the engine's command line no longer shows --hidden" sh -c "! grep -q -- '--hidden' '$tmp/peek/cases.json'"
check "peek: nor the hidden directory" sh -c "! grep -q '$tmp/hidden' '$tmp/peek/cases.json'"
check "peek: HIDDEN= does not reach the driver" grep -q "no HIDDEN here" "$tmp/peek/cases.json"

# ---- a launcher that places the rank count itself: "srun -n {np}" style
FAKE_MODE=pass "$engine" --lab fake --rubric "$here/fake.rubric" --driver "$driver" \
    --mpirun "$here/fake_mpirun.sh -np {np}" --np 2 >"$tmp/npword.log" 2>&1
check "launcher with {np}: the rank count lands in its place" last_line_is npword "score: 35 / 35"

# ---- a launcher that starts no rank (a hostfile naming a dead node): its reason, not its
# own warning first nor the banner a node's daemon printed on stdout as the launcher gave up
cat >"$tmp/nolaunch.sh" <<'EOF'
#!/bin/sh
echo '[head:123] plm:rsh: Warning: setpgid(124,124) failed in parent with errno=Permission denied(13)' >&2
echo 'ssh: connect to host node9: No route to host' >&2
printf -- '------\nA process or daemon was unable to complete a TCP connection\n------\n'
printf -- '------\nThis is usually an internal programming error\n------\n' >&2
exit 255
EOF
chmod +x "$tmp/nolaunch.sh"
FAKE_MODE=pass "$engine" --lab fake --rubric "$here/fake.rubric" --driver "$driver" \
    --mpirun "$tmp/nolaunch.sh" --np 2 --out "$tmp/nolaunch" >"$tmp/nolaunch.log" 2>&1
check "a launcher that starts no rank: the report gives its first reason (not its warning, not its stdout)" \
    grep -q "no rank's referee reached the engine; the launcher said first: ssh: connect to host node9: No route to host" "$tmp/nolaunch/cases.json"

# ---- usage and rubric errors: one line, exit 2
usage_error() {  # usage_error NAME EXPECTED-TEXT ENGINE-ARGS...
    name=$1 text=$2
    shift 2
    "$engine" "$@" >"$tmp/$name.log" 2>&1
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/$name.log")" = 1 ] && grep -q -- "$text" "$tmp/$name.log"
}
base="--lab fake --rubric $here/fake.rubric --driver $driver --mpirun $here/fake_mpirun.sh"
check "usage: missing options" usage_error usage "^pl-grade: error: " --lab fake
check "usage: --np 1e9 is not a world size" usage_error np1e9 "not a world size" $base --np 1e9
check "usage: --np 1025 is not a world size" usage_error np1025 "not a world size" $base --np 1025
check "usage: --np 0 is not a world size" usage_error np0 "not a world size" $base --np 0
check "usage: --sandbox maybe" usage_error sandboxword "--sandbox must be on, off or auto" $base --sandbox maybe
check "usage: --build-timeout -1" usage_error buildtimeout "--build-timeout" $base --build-timeout -1
printf 'lab fake\nnp 1\nfrobnicate 3\n' >"$tmp/bad.rubric"
check "bad rubric: file:line" usage_error badrubric "bad.rubric:3: unknown directive" --lab fake --rubric "$tmp/bad.rubric" --driver x
printf 'lab fake\nnp 1\ngroup a 1e308 a.*\ngroup b 1e308 b.*\n' >"$tmp/huge.rubric"
check "bad rubric: 1e308 points" usage_error huge "points must be a number from 0 to 1e+06" --lab fake --rubric "$tmp/huge.rubric" --driver x
{ echo 'lab fake'; echo 'np 1'; i=0; while [ $i -le 1000 ]; do echo "group g$i 1000000 g$i.*"; i=$((i + 1)); done; } >"$tmp/total.rubric"
check "bad rubric: a total over 1e9 points" usage_error total "more than 1e+09" --lab fake --rubric "$tmp/total.rubric" --driver x
printf 'lab fake\nnp 1\ngroup a 1 a.*\nperf p 1 parent a metric furlongs\n' >"$tmp/metric.rubric"
check "bad rubric: an unknown metric names the known ones" usage_error metric "bytes, msgs, speed, bubble, memory, traffic, freed" --lab fake --rubric "$tmp/metric.rubric" --driver x
check "sandbox on without bwrap or Landlock: one line naming the fix, exit 2" \
    sh -c "PATH=/nonexistent PL_SANDBOX_NO_LANDLOCK=1 '$engine' $base --sandbox on >'$tmp/nobwrap.log' 2>&1; [ \$? = 2 ] && [ \$(wc -l <'$tmp/nobwrap.log') = 1 ] && grep -q 'install bubblewrap' '$tmp/nobwrap.log'"

# ---- the sandbox (bubblewrap), where it can start here
if "$engine" --lab fake --rubric "$here/fake.rubric" --driver "$driver" --np 1 --sandbox on \
    --mpirun "$here/fake_mpirun.sh" --out "$tmp/sandbox" >"$tmp/sandbox.log" 2>&1; then
    check "sandbox: full marks inside" last_line_is sandbox "score: 35 / 35"
    check "sandbox: said so" has_line sandbox "sandbox: bubblewrap"
    FAKE_SANDBOXED=1 grade parentstop --np 1 --sandbox on
    check "sandbox: a rank that stops its parents cannot reach the engine" one_score_line parentstop
    check "sandbox: parentstop finished in time ($(cat "$tmp/parentstop.s") s)" took_at_most parentstop 8
    FAKE_SANDBOXED=1 grade forkloop --np 1 --sandbox on
    check "sandbox: a fork loop hits the process limit" grep -Eq "fork failed after [0-9]{1,4} children" "$tmp/forkloop/cases.json"
    check "sandbox: the fork loop is gone ($(cat "$tmp/forkloop.s") s)" no_leftovers
    if [ "$(id -u)" = 0 ]; then  # root drops the run to uid 65534, which cannot read a 0700 directory
        mkdir -m 700 "$tmp/private"
        cp "$driver" "$tmp/private/"
        check "sandbox: a driver uid 65534 cannot read is one line naming the fix, exit 2" \
            sh -c "'$engine' --lab fake --rubric '$here/fake.rubric' --driver '$tmp/private/fake_driver' --np 1 \
                   --mpirun '$here/fake_mpirun.sh' --sandbox on 2>'$tmp/private.err' >/dev/null;
                   [ \$? = 2 ] && [ \$(wc -l <'$tmp/private.err') = 1 ] && grep -q 'chmod o+rX' '$tmp/private.err'"
    fi
    MODE=peek FAKE_SANDBOXED=1 grade sbpeek --np 1 --sandbox on --hidden "$tmp/hidden"
    check "sandbox: the driver's parent is not the engine" \
        sh -c "grep -q 'parent cmdline' '$tmp/sbpeek/cases.json' && ! grep -Eq 'parent cmdline: \\[[^] ]*$(basename "$engine")[] ]' '$tmp/sbpeek/cases.json'"
else
    echo "# bubblewrap cannot start a sandbox here: sandbox checks skipped ($(head -n 1 "$tmp/sandbox.log"))"
fi
check "sandbox auto: grades either way" sh -c "FAKE_MODE=pass '$engine' $base --np 1 --sandbox auto | tail -n 1 | grep -q 'score: 35 / 35'"

# ---- the Lab 1 rubric parses and totals 100
"$engine" --lab 01-collectives --rubric "$root/grader/rubrics/01-collectives.rubric" --driver /bin/true \
    --mpirun "$here/fake_mpirun.sh" --np 1 >"$tmp/lab1.log" 2>&1
check "lab 1 rubric: 100 points" last_line_is lab1 "score: 0 / 100"
check "no fake driver left anywhere" no_leftovers

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all checks passed"
