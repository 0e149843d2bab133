#!/usr/bin/env bash
# classroom-item.sh LAB-NAME ITEM - one GitHub Classroom autograding test: exit 0 when the
# rubric item ITEM scored its full points in the last `make lab-N` (build/grade/LAB/results.json),
# and print the item's line either way, so the student sees why in the Actions log.
set -u
lab=${1:?lab} item=${2:?item}
results=$(cd "$(dirname "$0")/.." && pwd)/build/grade/$lab/results.json
if [ ! -s "$results" ]; then
    echo "$item: no results ($results is missing: the grading step failed before its report)"
    exit 1
fi
jq -r --arg n "$item" '.tests[] | select(.name == $n) | "\(.name): \(.score)/\(.max_score)\n\(.output)"' "$results"
jq -e --arg n "$item" '[.tests[] | select(.name == $n)] | length == 1 and .[0].score >= .[0].max_score' "$results" >/dev/null
