#!/usr/bin/env bash
# test-fresh.sh - the kit on machines that have nothing but a minimal Debian: as a new user
# meets it, and as Gradescope's container runs it.
#
#   scripts/test-fresh.sh [--variant userns|nouserns] [--keep]     (make test-fresh: both)
#
# A minimal Debian of this machine's release (mmdebstrap's minbase variant) is built once per
# variant and cached under build/fresh/; every run unpacks it anew, copies in the kit (its
# tracked and not-ignored files, as a clone has them) and ../shared, and runs inside, as
# root, with a clean environment and no other step:
#
#   userns    a new user's Debian, entered with bwrap (which pivots into it, so user
#             namespaces work inside and the grader's sandbox can start). The base has
#             `make`, the one tool the README's first command needs before it installs the
#             rest. The README's two commands: `make lab-1` (it must install, build and
#             print a graded report: the starter scores what it scores), then
#             `make lab-1 SOLUTION=1` (full marks, exit 0), then `make test` (it must end
#             "N passed, 0 failed").
#   nouserns  Gradescope's container, modelled by a plain chroot: the kernel refuses new user
#             namespaces to a chrooted process, as in Gradescope's and many CI containers,
#             so bubblewrap cannot start. The base is what Gradescope's autograder image is
#             documented to carry for any language (we assume python3 and pip; everything
#             else comes from setup.sh). `make gradescope LAB=1` is built here; inside,
#             setup.sh as Gradescope runs it, then run_autograder on the solution and on the
#             starter: each results.json must validate against
#             grader/gradescope/results.schema.json, the solution score every item but the
#             timed one in full, the starter less, both confined by Landlock; with Landlock
#             switched off too (PL_SANDBOX_NO_LANDLOCK=1), not graded, then graded with
#             UNCONFINED=1; then `make lab-1` in a copy of the kit: Landlock said in one line,
#             the grading done.
#
# Needs root (mount, chroot), mmdebstrap (installed when missing) and the network to the
# archive this machine's apt uses and to PyPI (Lab 5's model). Logs: build/fresh/<variant>.log.
# Exit 0 only when every step of the variant passed.
set -u
cd "$(dirname "$0")/.."
KIT=$(pwd)
SHARED=$(cd .. && pwd)/shared
VARIANT=userns KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
        --variant) VARIANT=${2:-}; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test-fresh.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case $VARIANT in userns | nouserns) ;; *) echo "test-fresh.sh: --variant is userns or nouserns, not '$VARIANT'" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "test-fresh.sh: needs root (it mounts /proc and /dev into a chroot); run it with sudo" >&2; exit 2; }
[ -d "$SHARED" ] || { echo "test-fresh.sh: no $SHARED beside the kit (the kit's docs read it)" >&2; exit 2; }

say() { echo "test-fresh ($VARIANT): $*"; }
need() { # need COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    say "installing $2 (for $1)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2"; } >/dev/null 2>&1 ||
        { echo "test-fresh.sh: $1 is missing and apt-get could not install $2" >&2; exit 1; }
}
need mmdebstrap mmdebstrap
[ $VARIANT = userns ] && need bwrap bubblewrap

SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ -n "$SUITE" ] || { echo "test-fresh.sh: cannot tell this machine's Debian release (/etc/os-release)" >&2; exit 2; }
DIR=$KIT/build/fresh
# the base: minbase and make (a user types make); Gradescope's adds python3 and pip
if [ $VARIANT = userns ]; then INCLUDE=make; else INCLUDE=make,python3,python3-pip,ca-certificates; fi
TAR=$DIR/$SUITE-minbase-$VARIANT.tar
ROOT=$DIR/root-$VARIANT
LOG=$DIR/$VARIANT.log
mkdir -p "$DIR"

# -- the cached system ------------------------------------------------------------------------
if [ ! -s "$TAR" ]; then
    say "building a minimal $SUITE (mmdebstrap --variant=minbase, + $INCLUDE) into $TAR"
    # the archive this machine's apt uses (its sources), so nothing here names a mirror
    if ! mmdebstrap --variant=minbase --include="$INCLUDE" --mode=root --format=tar "$SUITE" "$TAR.tmp" \
        </dev/null >"$DIR/mmdebstrap-$VARIANT.log" 2>&1; then
        tail -n 5 "$DIR/mmdebstrap-$VARIANT.log" >&2
        echo "test-fresh.sh: mmdebstrap failed (network? see $DIR/mmdebstrap-$VARIANT.log)" >&2
        rm -f "$TAR.tmp"
        exit 1
    fi
    mv "$TAR.tmp" "$TAR"
fi

# -- a fresh root from it -----------------------------------------------------------------------
unmount_all() { for m in dev/shm dev/pts dev sys proc; do mountpoint -q "$ROOT/$m" 2>/dev/null && umount -l "$ROOT/$m"; done; }
cleanup() {
    unmount_all
    [ $KEEP = 1 ] || rm -rf --one-file-system "$ROOT"
}
[ -d "$ROOT" ] && { unmount_all; rm -rf --one-file-system "$ROOT"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$ROOT"
tar -xf "$TAR" -C "$ROOT" || { echo "test-fresh.sh: cannot unpack $TAR" >&2; exit 1; }
mkdir -p "$ROOT/src/paralab" "$ROOT/src/shared"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - 2>/dev/null | tar -xf - -C "$ROOT/src/paralab" ||
    { echo "test-fresh.sh: cannot copy the kit" >&2; exit 1; }
cp -a "$SHARED/." "$ROOT/src/shared/"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
# the /etc/hosts every installed Debian has (minbase ships none): without it each mpirun
# start waits seconds for DNS to answer for this machine's own name
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(cat /proc/sys/kernel/hostname)" >"$ROOT/etc/hosts"
for tool in bwrap gcc mpicc zip unzip jq gnuplot; do   # the point of the exercise
    [ -e "$ROOT/usr/bin/$tool" ] && say "note: the base system already has $tool"
done

# What runs inside, with a clean environment: no variable of this machine's session
# reaches it. Each step prints "=== STEP -> rc" after it.
if [ $VARIANT = userns ]; then
    INNER='cd /src/paralab || exit 2
run() { local name=$1; shift; echo "=== $name ($(date +%T))"; "$@"; echo "=== $name -> $?"; }
run "make lab-1" make lab-1
run "make lab-1 SOLUTION=1" make lab-1 SOLUTION=1
run "make test" make test'
else
    # Gradescope's layout: the zip in /autograder/source, the submission in /autograder/submission
    need zip zip
    need unzip unzip
    GS=$DIR/gradescope
    rm -rf "$GS"
    make --no-print-directory -s gradescope LAB=1 NP=2 RUBRIC_SCALE=1 LIMIT=600 OUT="$GS" >"$DIR/gradescope-zip.log" 2>&1 ||
        { say "FAIL: make gradescope LAB=1: $(tail -n 2 "$DIR/gradescope-zip.log" | tr '\n' ' ')"; exit 1; }
    mkdir -p "$ROOT/autograder/source" "$ROOT/autograder/submission" "$ROOT/autograder/results" "$ROOT/autograder/sub-starter"
    (cd "$ROOT/autograder/source" && unzip -q "$GS/autograder.zip") || { say "FAIL: cannot unzip the autograder"; exit 1; }
    cp solutions/01-collectives/collectives.c "$ROOT/autograder/submission/"
    cp labs/01-collectives/collectives.c "$ROOT/autograder/sub-starter/"
    printf '{"users": [{"email": "student@uni.edu", "id": 1, "name": "A Student"}]}\n' >"$ROOT/autograder/submission_metadata.json"
    INNER='run() { local name=$1; shift; echo "=== $name ($(date +%T))"; "$@"; echo "=== $name -> $?"; }
cd /autograder/source || exit 2
run "setup.sh" bash ./setup.sh
cp /autograder/source/run_autograder /autograder/run_autograder
cd /autograder
run "run_autograder (solution)" /autograder/run_autograder
cp /autograder/results/results.json /autograder/results-solution.json
rm -rf /autograder/submission && mv /autograder/sub-starter /autograder/submission
run "run_autograder (starter)" /autograder/run_autograder
cp /autograder/results/results.json /autograder/results-starter.json
PL_SANDBOX_NO_LANDLOCK=1 run "run_autograder (no sandbox)" /autograder/run_autograder
cp /autograder/results/results.json /autograder/results-refused.json
sed -i "s/^UNCONFINED=0/UNCONFINED=1/" /autograder/source/gradescope.conf
PL_SANDBOX_NO_LANDLOCK=1 run "run_autograder (UNCONFINED=1)" /autograder/run_autograder
cp /autograder/results/results.json /autograder/results-unconfined.json
cd /src/paralab || exit 2
run "make lab-1" make lab-1'
fi
ENV=(env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb
     USER=root LOGNAME=root SHELL=/bin/bash)
start=$SECONDS
say "running in $ROOT (log: $LOG)"
if [ $VARIANT = nouserns ]; then
    mount -t proc proc "$ROOT/proc" && mount -t sysfs sys "$ROOT/sys" && mount --bind /dev "$ROOT/dev" &&
        mount -t devpts -o newinstance,ptmxmode=0666 devpts "$ROOT/dev/pts" && mount -t tmpfs -o size=2g shm "$ROOT/dev/shm" ||
        { echo "test-fresh.sh: cannot mount /proc, /sys, /dev, /dev/shm into $ROOT" >&2; exit 1; }
    timeout 5400 chroot "$ROOT" "${ENV[@]}" /bin/bash -c "$INNER" </dev/null >"$LOG" 2>&1
else
    # bwrap as root: it pivots into the root (no chroot, so namespaces may nest) and keeps
    # every capability, as a container's root has. The machine's own /proc is bound in
    # whole: a sandbox started inside may mount a proc of its own only where one is fully
    # visible (a fresh proc mount here would not count as one).
    timeout 5400 bwrap --bind "$ROOT" / --dev-bind /dev /dev --bind /proc /proc --bind /sys /sys --perms 1777 --tmpfs /dev/shm \
        --cap-add ALL --share-net --die-with-parent -- "${ENV[@]}" /bin/bash -c "$INNER" </dev/null >"$LOG" 2>&1
fi
rc=$?
mins=$(((SECONDS - start + 30) / 60))

# -- the verdict ----------------------------------------------------------------------------------
fails=0
pass() { say "ok: $*"; }
fail() { say "FAIL: $*"; fails=$((fails + 1)); }
rc_of() { sed -n "s/^=== $1 -> \([0-9]*\)$/\1/p" "$LOG" | tail -n 1; }
section() { awk -v s="=== $1 (" -v e="=== $1 ->" 'index($0, s) == 1 { on = 1 } on { print } index($0, e) == 1 { on = 0 }' "$LOG"; }
[ $rc = 124 ] && fail "the run took longer than 90 minutes and was stopped"
if [ $VARIANT = userns ]; then
    score=$(section "make lab-1" | grep -a '^score:' | tail -n 1)
    r=$(rc_of "make lab-1")
    # the starter is graded, not passed: the engine exits 1 below full marks (make then says
    # "Error 1" and exits 2); an install or build failure leaves no score line
    if [ -n "$score" ] && { [ "$r" = 0 ] || [ "$r" = 2 ]; } && ! section "make lab-1" | grep -aq 'still missing'; then
        pass "make lab-1 installed, built and graded the starter ($score, exit $r)"
    else fail "make lab-1 (exit ${r:-none}): $(section "make lab-1" | tail -n 3 | tr '\n' ' ')"; fi
    score=$(section "make lab-1 SOLUTION=1" | grep -a '^score:' | tail -n 1)
    r=$(rc_of "make lab-1 SOLUTION=1")
    if [ "$r" = 0 ]; then pass "make lab-1 SOLUTION=1: $score"
    else fail "make lab-1 SOLUTION=1 exited ${r:-none}: ${score:-no score line}"; fi
    total=$(section "make test" | grep -aE '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    r=$(rc_of "make test")
    if [ "$r" = 0 ] && grep -qE '^[0-9]+ passed, 0 failed$' <<<"$total"; then pass "make test: $total"
    else
        fail "make test exited ${r:-none}: ${total:-no summary line}"
        # each failure, and the comment lines a test printed right after it (what it saw)
        section "make test" | awk '/^not ok/ { print; n = 8; next } n > 0 && /^# / { print; n--; next } { n = 0 }' |
            head -n 60 | sed 's/^/    /'
    fi
    if section "make lab-1" | grep -aq 'no sandbox'; then fail "the sandbox did not start where user namespaces work"
    else pass "the grader's sandbox started"; fi
else
    r=$(rc_of "setup.sh")
    if [ "$r" = 0 ] && section "setup.sh" | grep -aq 'setup.sh: the kit is built'; then pass "setup.sh built the autograder"
    else fail "setup.sh exited ${r:-none}: $(section "setup.sh" | tail -n 3 | tr '\n' ' ')"; fi
    PYJ=""
    for p in /usr/bin/python3 python3; do "$p" -c 'import jsonschema' 2>/dev/null && { PYJ=$p; break; }; done
    [ -n "$PYJ" ] || { need /usr/bin/python3 python3; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-jsonschema >/dev/null 2>&1; PYJ=/usr/bin/python3; }
    for who in solution starter; do
        res=$ROOT/autograder/results-$who.json
        v=$("$PYJ" tests/grader/validate_json.py grader/gradescope/results.schema.json "$res" 2>&1 | head -n 1)
        if [ "$(rc_of "run_autograder ($who)")" = 0 ] && [[ $v == valid* ]]; then pass "run_autograder ($who): results.json validates against the schema"
        else fail "run_autograder ($who): ${v:-no results.json}"; fi
    done
    need jq jq
    res=$ROOT/autograder/results-solution.json
    items=$(($(grep -cE '^(group|perf) ' grader/rubrics/01-collectives.rubric) - 1)) # every item but the timed one
    if jq -e --argjson n "$items" '[.tests[] | select(.name != "allreduce_ring.speed") | .score == .max_score] | all and length == $n' "$res" >/dev/null 2>&1; then
        pass "run_autograder: the solution scores every item but the timed one in full ($(jq -r .score "$res"))"
    else fail "run_autograder: the solution lost points: $(jq -c '[.tests[] | select(.score != .max_score) | .name]' "$res" 2>&1)"; fi
    if jq -e '.score < 50' "$ROOT/autograder/results-starter.json" >/dev/null 2>&1; then
        pass "run_autograder: the starter scores $(jq -r .score "$ROOT/autograder/results-starter.json")"
    else fail "run_autograder: the starter scores $(jq -r .score "$ROOT/autograder/results-starter.json" 2>&1)"; fi
    n=$(section "run_autograder (solution)" | grep -ac 'confined by Landlock')
    if [ "$n" = 1 ] && jq -e '.output | contains("graded in the Landlock sandbox")' "$res" >/dev/null 2>&1; then
        pass "run_autograder: bubblewrap cannot start, so Landlock confines the grading (one line, and the results say so)"
    else fail "run_autograder: $n lines say Landlock confines the grading (expected 1), results: $(jq -r .output "$res" 2>&1 | tail -n 1)"; fi
    n=$(section "run_autograder (no sandbox)" | grep -ac 'not graded: no sandbox can start')
    if [ "$n" = 1 ] && jq -e '.score == 0 and (.output | startswith("Not graded"))' "$ROOT/autograder/results-refused.json" >/dev/null 2>&1; then
        pass "run_autograder where no sandbox can start: not graded, one line, and results.json tells the student to ask"
    else fail "run_autograder with no sandbox: $n refusal lines, results: $(head -c 200 "$ROOT/autograder/results-refused.json" 2>&1)"; fi
    if section "run_autograder (UNCONFINED=1)" | grep -aq 'UNCONFINED=1: where no sandbox can start' &&
        jq -e '.output | contains("graded without a sandbox")' "$ROOT/autograder/results-unconfined.json" >/dev/null 2>&1; then
        pass "run_autograder with UNCONFINED=1: grades without a sandbox, saying so in the log and the results"
    else fail "run_autograder with UNCONFINED=1: $(jq -r .output "$ROOT/autograder/results-unconfined.json" 2>&1 | tail -n 1)"; fi
    score=$(section "make lab-1" | grep -a '^score:' | tail -n 1)
    n=$(section "make lab-1" | grep -ac '^sandbox: Landlock')
    if [ -n "$score" ] && [ "$n" = 1 ] && ! section "make lab-1" | grep -aq 'no sandbox'; then
        pass "make lab-1 without user namespaces: one line says Landlock confines the runs, then $score"
    else fail "make lab-1 without user namespaces: $n Landlock lines, ${score:-no score line}"; fi
fi
say "took $mins min; $fails failure(s)"
exit $((fails > 0))
