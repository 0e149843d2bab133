#!/usr/bin/env bash
# compare_cases.sh - two versions of the grader, case by case: the cases.json of each
# grading of a self-test (SELFTEST_KEEP=DIR tests/grader/test_selftest.sh keeps them as
# DIR/<lab>-<name>.json) against those of a baseline run.
#
#   tests/grader/compare_cases.sh BASE-DIR NEW-DIR [PREFIX]
#
# For every grading in both directories whose file name starts with PREFIX (a lab, e.g.
# 02-tp-gemm), one line per case (np/name) whose group or classification differs, or that
# only one side has:
#   <grading> <np/case>: <group> <class> -> <group> <class>   (with the new detail)
# and a summary line per grading. Exit 0 when nothing differs, 1 otherwise, 2 on usage.
set -u
[ $# -ge 2 ] && [ -d "$1" ] && [ -d "$2" ] || { echo "usage: compare_cases.sh BASE-DIR NEW-DIR [PREFIX]" >&2; exit 2; }
base=$1 new=$2 prefix=${3:-}

# "id<TAB>group<TAB>classification<TAB>detail" per case of an engine cases.json (cJSON's
# layout: one field per line, "detail" last).
cases() {
    awk -F'\t' '
        function val(line) { sub(/^[^:]*:[ \t]*/, "", line); sub(/,$/, "", line); gsub(/^"|"$/, "", line); return line }
        /^[ \t]*"id":/ { id = val($0) }
        /^[ \t]*"group":/ { group = val($0) }
        /^[ \t]*"classification":/ { cls = val($0) }
        /^[ \t]*"detail":/ { print id "\t" group "\t" cls "\t" val($0); id = group = cls = "" }
    ' "$1" | sort
}

rc=0 compared=0
for f in "$base"/"$prefix"*.json; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .json)
    g="$new/$name.json"
    if [ ! -f "$g" ]; then
        echo "$name: no new grading"
        rc=1
        continue
    fi
    compared=$((compared + 1))
    diffs=$(join -t $'\t' -a 1 -a 2 -e '-' -o '0,1.2,1.3,2.2,2.3,2.4' <(cases "$f") <(cases "$g") |
        awk -F'\t' -v n="$name" '$2 != $4 || $3 != $5 { printf "%s %s: %s %s -> %s %s  (%s)\n", n, $1, $2, $3, $4, $5, $6 }')
    total=$(cases "$g" | wc -l)
    if [ -n "$diffs" ]; then
        echo "$diffs"
        echo "$name: $(echo "$diffs" | wc -l) of $total case(s) differ"
        rc=1
    else
        echo "$name: $total case(s), all the same"
    fi
done
for g in "$new"/"$prefix"*.json; do
    [ -f "$g" ] && [ ! -f "$base/$(basename "$g")" ] && { echo "$(basename "$g" .json): no baseline grading"; rc=1; }
done
[ "$compared" -gt 0 ] || { echo "no grading to compare under $base/$prefix*" >&2; exit 2; }
exit $rc
