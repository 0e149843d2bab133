#!/usr/bin/env bash
# tests/grader/test_landlock.sh - nothing a run starts escapes the sandbox, also where
# bubblewrap cannot start: spawn_probe.c, as the driver, asks the launcher (MPI_Comm_spawn,
# PMIx_Spawn underneath) to start a shell that copies a secret into a directory outside the
# run and leaves a mark in /dev/shm to prove it ran. Graded with no sandbox (the control: the
# copy happens), with Landlock (a bwrap that cannot start comes first in PATH), with
# bubblewrap where it works; and with neither, `--sandbox on` must refuse in one line.
# Prints "ok - ..." / "not ok - ..."; run by tests/run.sh.
set -u
cd "$(dirname "$0")/../.."
ENGINE=build/tools/pl-grade
MPICC=${MPICC:-mpicc}
TMP=$(mktemp -d /tmp/paralab-landlock.XXXXXX)
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_rmaps_base_oversubscribe=1
MARK=/dev/shm/paralab-spawn-ran.$$
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"; rm -f "$MARK"' EXIT
chmod 755 "$TMP"  # uid 65534 must reach the driver
fails=0
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }

if ! $MPICC -O1 tests/grader/spawn_probe.c -o "$TMP/probe" 2>"$TMP/cc.log"; then
    bad "the spawn probe builds: $(head -n 3 "$TMP/cc.log" | tr '\n' ' ')"
    exit 1
fi
chmod 755 "$TMP/probe"
printf 'lab probe\ntimeout 4\nwatchdog 4\nrun-timeout 12\nnp 1\ngroup escape 10 escape.*\n' >"$TMP/probe.rubric"
mkdir -p "$TMP/nobwrap" "$TMP/tree"
printf '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n' >"$TMP/nobwrap/bwrap"
chmod 755 "$TMP/nobwrap/bwrap"
echo "the hidden rubric's seed" >"$TMP/tree/secret"
chmod 644 "$TMP/tree/secret"
chmod 777 "$TMP/tree"  # the file system's permissions alone would let uid 65534 in
export PROBE_SCRIPT="touch $MARK; cat $TMP/tree/secret >$TMP/tree/leak"

grade() { # grade NAME PATH-PREFIX ENGINE-ARGS...
    local name=$1 pre=$2
    shift 2
    rm -f "$MARK" "$TMP/tree/leak"
    PATH="$pre$PATH" timeout 120 "$ENGINE" --lab probe --rubric "$TMP/probe.rubric" --driver "$TMP/probe" \
        --mpirun mpirun "$@" >"$TMP/$name.log" 2>&1
    echo $? >"$TMP/$name.rc"
}

# the control: unconfined, the launcher starts the shell and the copy happens
grade off "" --sandbox off
if [ -e "$MARK" ] && [ -s "$TMP/tree/leak" ]; then ok "control: unconfined, a spawned shell copies the secret out of the tree"
else bad "control: the probe's spawn did not run unconfined (mark $( [ -e "$MARK" ] && echo yes || echo no)); the test proves nothing"; fi
if grep -q 'note: --sandbox off: the student.s code runs unconfined' "$TMP/off.log"; then ok "--sandbox off says in one line what it risks"
else bad "--sandbox off: no line about the risk"; fi

# Landlock: the spawned shell runs (mark) but reads and writes nothing of the tree
grade landlock "$TMP/nobwrap:" --sandbox on
if ! grep -q '^sandbox: Landlock' "$TMP/landlock.log"; then
    if [ "$(cat "$TMP/landlock.rc")" = 2 ] && grep -q 'no Landlock' "$TMP/landlock.log"; then
        echo "# this kernel has no Landlock: --sandbox on refused in one line, as it must"
    else bad "Landlock: neither a Landlock sandbox nor a one-line refusal: $(head -n 2 "$TMP/landlock.log" | tr '\n' ' ')"; fi
else
    ok "Landlock: the engine says it confines the run with Landlock"
    if [ -e "$MARK" ]; then ok "Landlock: the launcher did start the spawned shell (so the next check means something)"
    else bad "Landlock: the spawned shell left no mark in /dev/shm (mode $(stat -c %a /dev/shm): it must be writable by all, as on any Linux)"; fi
    if [ ! -e "$TMP/tree/leak" ]; then ok "Landlock: the spawned shell could neither read the secret nor write the tree"
    else bad "Landlock: the spawned shell wrote $TMP/tree/leak"; fi
    n=$(find "$TMP" -maxdepth 1 -name 'pl-grade.*' | wc -l)
    [ "$n" = 0 ] && ok "Landlock: the work and scratch directories are gone" || bad "Landlock: $n work directories left"
fi

# bubblewrap, where it starts: the same probe, the same result
if bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc true 2>/dev/null; then
    grade bwrap "" --sandbox on
    if grep -q '^sandbox: bubblewrap' "$TMP/bwrap.log" && [ ! -e "$TMP/tree/leak" ]; then
        ok "bubblewrap: the spawned shell could neither read the secret nor write the tree"
    else bad "bubblewrap: $(grep -m1 '^sandbox' "$TMP/bwrap.log"), leak $( [ -e "$TMP/tree/leak" ] && echo yes || echo no)"; fi
fi

# pl-landlock, the class grader's builds where bwrap cannot start: the machine readable but
# the hidden directories, only its own directory writable
LL=build/tools/pl-landlock
if [ -x "$LL" ] && [ -n "$(env -u PL_SANDBOX_NO_LANDLOCK "$LL" --read / -- true 2>&1)" ]; then
    echo "# pl-landlock: no Landlock in this kernel: $("$LL" --read / -- true 2>&1)"
elif [ -x "$LL" ]; then
    mkdir -p "$TMP/w"
    ll() { "$LL" --read / --hide "$TMP/tree" --write "$TMP/w" -- sh -c "$1" >/dev/null 2>&1; }
    ll "test -r /usr/include/stdio.h && ls $TMP >/dev/null" && ok "pl-landlock: the system's files readable, the hidden directory's parent listable" ||
        bad "pl-landlock: cannot read the system's files"
    ll "cat $TMP/tree/secret" && bad "pl-landlock: read a file of a hidden directory" || ok "pl-landlock: a hidden directory's files cannot be read"
    ll "echo x >$TMP/w/f" && [ -s "$TMP/w/f" ] && ok "pl-landlock: its own directory is writable" || bad "pl-landlock: cannot write its own directory"
    ll "echo x >$TMP/f2" ; [ -e "$TMP/f2" ] && bad "pl-landlock: wrote outside its own directory" || ok "pl-landlock: nothing else is writable"
    # --system --private-tmp (a daemon on another node, across hosts): the system's files,
    # a TMPDIR of its own that is gone afterwards, the command's status, nothing of the tree
    out=$(TMPDIR=$TMP/w "$LL" --system --private-tmp -- sh -c 'echo x >"$TMPDIR/f" && echo "$TMPDIR"; test -r /usr/include/stdio.h || exit 9; exit 3' 2>&1); rc=$?
    case $out in
        "$TMP/w/pl-node."*) [ $rc = 3 ] && [ ! -e "$out" ] && ok "pl-landlock --private-tmp: a TMPDIR of its own, writable, removed after; the system's files readable; the command's status (3)" ||
            bad "pl-landlock --private-tmp: exit $rc, $out $( [ -e "$out" ] && echo 'left behind')" ;;
        *) bad "pl-landlock --private-tmp: no TMPDIR of its own: $out (exit $rc)" ;;
    esac
    "$LL" --system --private-tmp -- sh -c "cat $TMP/tree/secret || echo x >$TMP/f3" >/dev/null 2>&1; rc=$?
    [ $rc != 0 ] && [ ! -e "$TMP/f3" ] && ok "pl-landlock --system --private-tmp: neither reads nor writes elsewhere" ||
        bad "pl-landlock --system --private-tmp: read the secret or wrote $TMP/f3 (exit $rc)"
    out=$("$LL" --frobnicate x -- true 2>&1); rc=$?
    [ $rc = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && ok "pl-landlock: an unknown flag is one line, exit 2" || bad "pl-landlock: unknown flag gave exit $rc"
else
    bad "pl-landlock was not built ($LL)"
fi

# neither: --sandbox on refuses in one line, auto grades with a one-line note
PL_SANDBOX_NO_LANDLOCK=1 grade none "$TMP/nobwrap:" --sandbox on
if [ "$(cat "$TMP/none.rc")" = 2 ] && [ "$(wc -l <"$TMP/none.log")" = 1 ] && grep -q 'no sandbox can start here' "$TMP/none.log"; then
    ok "no bwrap, no Landlock: --sandbox on refuses in one line (exit 2)"
else bad "no bwrap, no Landlock: --sandbox on gave exit $(cat "$TMP/none.rc"), $(wc -l <"$TMP/none.log") line(s)"; fi
[ -e "$TMP/tree/leak" ] && bad "no sandbox: the refused grading still ran the probe"
PL_SANDBOX_NO_LANDLOCK=1 grade auto "$TMP/nobwrap:" --sandbox auto
n=$(grep -c 'no sandbox' "$TMP/auto.log")
[ "$n" = 1 ] && ok "no bwrap, no Landlock: --sandbox auto grades after one line saying so" || bad "--sandbox auto: $n lines about no sandbox"
exit $((fails > 0))
