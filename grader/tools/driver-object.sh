#!/usr/bin/env bash
# driver-object.sh - compile a lab's player half (the runner's files, grader/cases/labNN*.c and
# grader/player/labNN*.c) into one object whose
# only global symbols are main and the functions the kit gives the student (those of its
# definitions that the lab's headers name), so that a student's file cannot reach the
# driver's own state (its flags, its profile, its verdicts) by declaring it extern.
#
#   grader/tools/driver-object.sh OUT.o LAB-DIR -- CC FLAGS... -- SRC.c...
set -u
out=$1 labdir=$2
shift 2
[ "${1:-}" = -- ] || { echo "usage: driver-object.sh OUT LAB-DIR -- CC FLAGS -- SRC..." >&2; exit 2; }
shift
cc=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cc+=("$1"); shift; done
[ $# -gt 0 ] && shift
dir=$out.d
rm -rf "$dir"
mkdir -p "$dir"
objs=()
for src in "$@"; do
    obj=$dir/${#objs[@]}-$(basename "${src%.c}").o
    "${cc[@]}" -c "$src" -o "$obj" || exit 1
    objs+=("$obj")
done
ld -r -o "$dir/merged.o" "${objs[@]}" || exit 1
{
    echo main
    # the kit's functions for the student: defined here and named in the lab's headers
    names=$(cat "$labdir"/*.h 2>/dev/null | grep -oE '\b[A-Za-z_][A-Za-z0-9_]*\b' | sort -u)
    nm -g --defined-only --format=posix "$dir/merged.o" | awk '{print $1}' | sort -u | comm -12 - <(printf '%s\n' "$names")
} >"$dir/keep.syms"
objcopy --keep-global-symbols="$dir/keep.syms" "$dir/merged.o" "$out" || exit 1
rm -rf "$dir"
