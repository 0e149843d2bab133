#!/usr/bin/env bash
# test_faults.sh - the fault suite: hostile student files (tests/grader/faults/*.c) graded
# through the real engine, the real lab drivers and mpirun. Each file replaces a lab's
# student file (it includes the solution and overrides what it attacks with) and says in
# its first lines:
#   // lab: 01-collectives
#   // expect: CLASS GLOB     some case matching GLOB ends as CLASS (tampered, missing,
#                             forbidden, wrong, timeout, deadlock, crash, error); GLOB
#                             "(build)" for what the build refuses
#   // speed: quick|slow      FAULTS=quick (default, in `make test`) runs the quick ones,
#                             FAULTS=all (`make test-faults`) all
#   // np: 2 3                world sizes (default "2 3")
#   // full: ITEM...          rubric items that must still score full points
#   // sandbox: on            graded with --sandbox on (skipped where bwrap cannot start)
#   // sandbox: both          graded twice: as `make lab-N` does without the sandbox, and as
#                             `make grade` does with it
# For every file: it is caught as expected, it does not score full marks, the run ends
# within its bound (no hang), no process of it is left behind, the console's only score
# line is the engine's (the last), and junit.xml is valid XML.
# The gradings run FAULTS_JOBS at a time (default 2); their lines are printed in order.
# Prints "ok - ..." / "not ok - ...". B= the build directory (default build).
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}" "${FAULTS:=quick}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-faults.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$TMP"' EXIT
ENGINE=$B/tools/pl-grade

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }
header() { sed -n "1,12s|^// $2: *||p" "$1" | head -n 1; }
# "case classification" per line, from the engine's cases.json
classes() { awk -F'"' '/"case":/ {c=$4} /"classification":/ {print c, $4}' "$1"; }

case $FAULTS in quick | all) ;; *) notok "FAULTS must be quick or all, not '$FAULTS'"; exit 1 ;; esac
[ -x "$ENGINE" ] || { notok "the engine $ENGINE is built (make B=$B engine)"; exit 1; }
sandbox_ok=
if command -v bwrap >/dev/null && bwrap --unshare-all --unshare-user --ro-bind / / --dev /dev --proc /proc true 2>/dev/null; then  # as the sandbox starts
    sandbox_ok=yes
fi

# grade_fault NAME TAG MODE LAB CLS GLOB NP FULL BOUND FILE: one grading and its checks,
# its lines into $TMP/NAME-MODE.out (the gradings run FAULTS_JOBS at a time)
grade_fault() {
    local name=$1 tag=$2 mode=$3 lab=$4 cls=$5 glob=$6 np=$7 full=$8 bound=$9 f=${10}
    local bin=$B/cpu/faults/$lab/$name-$mode/driver log=$TMP/$name-$mode.log start=$SECONDS rc took score hit left
    local args=(--np "${np:-2 3}" --test-scale --out "$TMP/$name-$mode" --sandbox "$mode")
    # a filter keeps the run short, unless other groups must be seen keeping their points
    [ -z "$full" ] && [ "$glob" != "(build)" ] && args+=(--filter "$glob")
    timeout "$bound" "$ENGINE" --lab "$lab" --rubric "grader/rubrics/$lab.rubric" --driver "$bin" \
        --build "$MAKE --no-print-directory -s B=$B driver LAB=$lab SRCFILES=$f FLAVOR=cpu BIN=$bin" \
        --mpirun "$MPIRUN" "${args[@]}" >"$log" 2>&1
    rc=$?
    took=$((SECONDS - start))
    score=$(tail -n 1 "$log")
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        notok "$tag: finished within ${bound} s (killed after $took s: a hang)"
        return
    fi
    hit=$(classes "$TMP/$name-$mode/cases.json" 2>/dev/null | while read -r c k; do
        # shellcheck disable=SC2254
        case "$c" in $glob) [ "$k" = "$cls" ] && { echo "$c"; break; } ;; esac
    done)
    if [ -n "$hit" ]; then
        ok "$tag: caught as $cls ($hit), $score, $took s"
    else
        notok "$tag: caught as $cls $glob (seen: $(classes "$TMP/$name-$mode/cases.json" 2>/dev/null | awk '{print $2}' | sort | uniq -c | tr '\n' ' '); exit $rc)"
        grep -E "^ +(tampered|missing|wrong|crash|timeout|deadlock|error|forbidden|build)" "$log" | head -3 | sed 's/^/# /'
    fi
    [ $rc != 0 ] && ok "$tag: not full marks (exit $rc)" || notok "$tag: not full marks ($score)"
    sleep 0.2
    left=$(pgrep -f "$bin" | tr '\n' ' ')
    [ -z "$left" ] && ok "$tag: no process left behind" || notok "$tag: no process left behind (pids $left)"
    if [ "$(grep -c '^score:' "$log")" = 1 ] && echo "$score" | grep -q '^score: '; then
        ok "$tag: the engine's score line is the only one"
    else
        notok "$tag: the engine's score line is the only one ($(grep -c '^score:' "$log") lines start with 'score:')"
    fi
    if ! command -v xmllint >/dev/null; then
        notok "$tag: junit.xml is valid XML (xmllint is needed: apt-get install libxml2-utils, or scripts/install-deps.sh --tests)"
    elif xmllint --noout "$TMP/$name-$mode/junit.xml" 2>/dev/null; then ok "$tag: junit.xml is valid XML"
    else notok "$tag: junit.xml is valid XML"; fi
    for item in $full; do
        if grep -Eq "^  $item +([0-9.]+)/\\1 " "$log"; then
            ok "$tag: $item keeps its full points"
        else
            notok "$tag: $item keeps its full points ($(grep -E "^  $item " "$log" | head -n 1 | sed 's/^ *//'))"
        fi
    done
}

: "${FAULTS_JOBS:=2}"
n=0
outs=()
for f in tests/grader/faults/*.c; do
    name=$(basename "$f" .c)
    lab=$(header "$f" lab) expect=$(header "$f" expect) speed=$(header "$f" speed)
    np=$(header "$f" np) full=$(header "$f" full) sandbox=$(header "$f" sandbox)
    if [ -z "$lab" ] || [ -z "$expect" ] || [ -z "$speed" ]; then
        notok "$name: has '// lab:', '// expect:' and '// speed:' lines"
        continue
    fi
    [ "$FAULTS" = all ] || [ "$speed" = quick ] || continue
    # FAULTS_ONLY="name ..." grades only those files (a fault's own check)
    if [ -n "${FAULTS_ONLY:-}" ] && [[ " $FAULTS_ONLY " != *" $name "* ]]; then continue; fi
    modes=off
    case $sandbox in on) modes=on ;; both) modes="off on" ;; esac
    # FAULTS_NP="3", FAULTS_SANDBOX=off: every file at those world sizes, in that mode only
    # (tests/multinode/multinode.sh: a rank on another host, where no sandbox wraps the launcher)
    [ -n "${FAULTS_NP:-}" ] && np=$FAULTS_NP
    if [ -n "${FAULTS_SANDBOX:-}" ]; then modes=$FAULTS_SANDBOX; [ "$sandbox" = both ] && sandbox=$FAULTS_SANDBOX; fi
    for mode in $modes; do
        if [ "$mode" = on ] && [ -z "$sandbox_ok" ]; then
            echo "# $name: sandboxed run skipped (bubblewrap cannot start a sandbox here)"
            continue
        fi
        tag=$name
        [ "$sandbox" = both ] && tag="$name ($( [ "$mode" = on ] && echo 'make grade, sandbox' || echo 'make lab-N, no sandbox'))"
        n=$((n + 1))
        bound=180
        [ "$speed" = slow ] && bound=600
        while [ "$(jobs -rp | wc -l)" -ge "$FAULTS_JOBS" ]; do wait -n; done
        grade_fault "$name" "$tag" "$mode" "$lab" "${expect%% *}" "${expect#* }" "$np" "$full" "$bound" "$f" \
            >"$TMP/$name-$mode.out" 2>&1 &
        outs+=("$TMP/$name-$mode.out")
    done
done
wait
for o in "${outs[@]}"; do cat "$o"; done
[ "$n" -gt 0 ] && ok "$n fault(s) graded (FAULTS=$FAULTS)" || notok "no fault was graded (FAULTS=$FAULTS)"
