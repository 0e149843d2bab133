#!/usr/bin/env bash
# tests/grader/test_confine.sh - the play filter by argument: confine_probe.c installs
# grader/runner/confine.c's filter and tries what a player may and may not do (fcntl's
# commands among them). Prints "ok - ..." / "not ok - ..."; run by tests/run.sh.
set -u
cd "$(dirname "$0")/../.."
TMP=$(mktemp -d /tmp/paralab-confine.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if ! cc -std=c11 -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -Igrader/runner tests/grader/confine_probe.c grader/runner/confine.c \
    -o "$TMP/probe" 2>"$TMP/cc.log"; then
    echo "not ok - the play filter's probe builds: $(head -n 3 "$TMP/cc.log" | tr '\n' ' ')"
    exit 1
fi
rc=0
for how in mpi referee; do
    timeout 30 "$TMP/probe" $how
    r=$?
    [ $r = 0 ] || { echo "not ok - the play filter's probe ($how) exited $r"; rc=1; }
done
exit $rc
