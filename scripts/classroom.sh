#!/usr/bin/env bash
# classroom.sh LAB-NAME OUTDIR - writes OUTDIR/.github/workflows/classroom.yml, the GitHub
# Classroom autograding workflow for one lab (make classroom LAB=N [NP="2 4"] [RUBRIC_SCALE=1]).
# Copy OUTDIR/.github into the assignment's template repository (a copy of the kit). On every
# push the workflow installs the kit's packages, grades the student's file once with
# `make lab-N`, then reports one test per rubric item through GitHub's autograding actions
# (classroom-resources/autograding-command-grader, -grading-reporter), each worth the item's
# points: full points when the item scored full in results.json (scripts/classroom-item.sh).
# Exit 0 with the file's path on the last line; 2 with one line on a usage error.
set -eu
lab=${1:-}
out=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "classroom.sh: error: $*" >&2; exit 2; }
[ -n "$lab" ] && [ -d "$root/labs/$lab" ] || die "make classroom wants LAB=N (a lab with a folder in labs/)"
rubric=$root/grader/rubrics/$lab.rubric
[ -f "$rubric" ] || die "lab $lab has no rubric: nothing to grade"
[ -n "$out" ] || die "no output directory"
num=${lab%%-*}
num=${num#0}
opts=""
[ -n "${PL_NP:-}" ] && opts="$opts NP=\"$PL_NP\""
[ -n "${RUBRIC_SCALE:-}" ] && opts="$opts RUBRIC_SCALE=1"

mkdir -p "$out/.github/workflows"
file=$out/.github/workflows/classroom.yml
{
    cat <<HEAD
# GitHub Classroom autograding for lab $num ($lab), written by \`make classroom LAB=$num\`.
# On every push: install the kit's packages, grade the student's labs/$lab file once with
# \`make lab-$num\`, then one autograding test per rubric item, worth the item's points
# (all or nothing: an item scores its points when it scored full in results.json).
name: Autograding Tests
"on":
  - push
  - repository_dispatch
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    timeout-minutes: 60
    if: github.actor != 'github-classroom[bot]'
    steps:
      - name: Checkout code
        uses: actions/checkout@v4
      - name: Install the kit's packages
        run: scripts/install-deps.sh
      - name: Grade lab $num
        run: make NO_CUDA=1 lab-$num$opts || true
HEAD
    ids=()
    while read -r kind name points _; do
        id=$(echo "$name" | tr -c 'A-Za-z0-9_\n' '-')
        ids+=("$id")
        cat <<STEP
      - name: $name
        id: $id
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: $name
          command: scripts/classroom-item.sh $lab $name
          timeout: 1
          max-score: $points
STEP
    done < <(sed 's/#.*//' "$rubric" | awk '$1 == "group" || $1 == "perf"')
    echo "      - name: Autograding Reporter"
    echo "        uses: classroom-resources/autograding-grading-reporter@v1"
    echo "        env:"
    for id in "${ids[@]}"; do
        echo "          $(echo "$id" | tr 'a-z' 'A-Z')_RESULTS: \"\${{steps.$id.outputs.result}}\""
    done
    echo "        with:"
    # the reporter splits its runners at commas and blanks: a folded list, five a line
    echo "          runners: >-"
    for ((i = 0; i < ${#ids[@]}; i += 5)); do
        line=$(IFS=,; echo "${ids[*]:i:5}")
        ((i + 5 < ${#ids[@]})) && line+=,
        echo "            $line"
    done
} >"$file"
echo "classroom.sh: lab $lab, ${#ids[@]} rubric items; copy $out/.github into the template repository"
echo "$file"
