#!/usr/bin/env bash
# test_scan.sh - the static scan (grader/tools/scan.sh) and the kit's lists of what a
# submission may define and call. Prints "ok - ..." / "not ok - ...".
set -u
cd "$(dirname "$0")/../.."
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }
scan() { grader/tools/scan.sh "labs/$1" "${@:2}"; }

# every solution and starter: nothing to report
for d in solutions/*/ labs/*/; do
    lab=$(basename "$d")
    files=$(ls "$d"*.c 2>/dev/null) || continue
    # shellcheck disable=SC2086
    out=$(scan "$lab" $files)
    if echo "$out" | tail -n 1 | grep -q '^scan: 0 finding(s) in'; then
        ok "scan: $d holds nothing to report"
    else
        notok "scan: $d holds nothing to report ($(echo "$out" | head -n 2 | tr '\n' ' '))"
    fi
done
# the hostile files: each construct named, with its line
expect() { # expect FILE TEXT
    if scan 01-collectives "tests/grader/faults/$1" | grep -q -- "$2"; then ok "scan: $1 -> $2"; else notok "scan: $1 -> $2"; fi
}
expect libc_gadget.c "forge.h:[0-9]*: a cast to a function pointer"
expect libc_gadget.c "a /proc path"
expect forge_every_fd.c "reaches into a FILE's fields"
expect syscall_alias.c "syscall_alias.c:[0-9]*: calls __fork"
expect premain_section.c "premain_section.c:[0-9]*: a section, constructor, alias or indirect-function attribute"
expect read_solutions.c "a cast to a function pointer"

# what a submission may define: the kit's untouched starter's globals (grader/api/)
for f in grader/api/*.syms; do
    lab=$(basename "$f" .syms)
    [ -d "labs/$lab" ] || { notok "grader/api/$lab.syms: lab $lab exists"; continue; }
    got=$(for c in labs/"$lab"/*.c; do
        [ -f "$c" ] || continue
        mpicc -std=c11 -D_GNU_SOURCE -Icommon -Ikernels -Idatasets -Imodels -I"labs/$lab" -c "$c" -o /tmp/scan-api.$$.o &&
            nm -g --defined-only --format=posix /tmp/scan-api.$$.o | awk '{print $1}'
    done | sort)
    rm -f /tmp/scan-api.$$.o
    if [ "$got" = "$(sort "$f")" ]; then
        ok "grader/api/$lab.syms lists exactly the globals labs/$lab defines"
    else
        notok "grader/api/$lab.syms lists exactly the globals labs/$lab defines"
    fi
done
