#!/usr/bin/env bash
# gradescope.sh LAB-NAME OUTDIR - builds OUTDIR/autograder.zip for a Gradescope programming
# assignment (make gradescope LAB=N [HIDDEN=dir] [NP="2 4"] [RUBRIC_SCALE=1] [LIMIT=s]):
#
#   setup.sh, run_autograder    at the root of the zip, as Gradescope wants them
#   gradescope.conf             the lab and the grading options baked in
#   the kit                     Makefile, common/, kernels/, datasets/ (no cache), models/,
#                               grader/, labs/, scripts/: never solutions/ nor tests/ (student
#                               code runs in this container: it must find no solution there)
#   hidden/LAB.rubric           the instructor's hidden rubric, when HIDDEN= has one
#
# Environment: HIDDEN, PL_NP (make's NP), RUBRIC_SCALE, LIMIT, UNCONFINED. Exit 0 with the zip's path on
# the last line; 2 with one line on a usage error.
set -eu
lab=${1:-}
out=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "gradescope.sh: error: $*" >&2; exit 2; }
[ -n "$lab" ] && [ -d "$root/labs/$lab" ] || die "make gradescope wants LAB=N (a lab with a folder in labs/)"
[ -f "$root/grader/rubrics/$lab.rubric" ] || die "lab $lab has no rubric: nothing to grade"
ls "$root/labs/$lab/"*.c >/dev/null 2>&1 || die "lab $lab has no student file (labs/$lab/*.c)"
[ -n "$out" ] || die "no output directory"
command -v zip >/dev/null || die "zip is not installed (apt-get install zip; scripts/install-deps.sh installs it)"
hidden=${HIDDEN:-}
if [ -n "$hidden" ]; then
    [ -d "$hidden" ] || die "HIDDEN=$hidden: not a directory"
fi

stage=$out/stage
rm -rf "$stage" "$out/autograder.zip"
mkdir -p "$stage"
cd "$root"
for d in common kernels datasets models grader labs scripts; do
    # every file but the model cache (a link to a shared download) and build outputs
    find "$d" \( -name cache -o -name '*.o' -o -name '*.a' \) -prune -o -type f -print
done | while IFS= read -r f; do
    mkdir -p "$stage/$(dirname "$f")"
    cp -p "$f" "$stage/$f"
done
cp -p Makefile "$stage/"
[ -f README.md ] && cp -p README.md "$stage/"
cp -p grader/gradescope/setup.sh grader/gradescope/run_autograder "$stage/"
if [ -n "$hidden" ] && [ -f "$hidden/$lab.rubric" ]; then
    mkdir -p "$stage/hidden"
    cp "$hidden/$lab.rubric" "$stage/hidden/"
fi
{
    echo "# written by make gradescope: what run_autograder grades, and how"
    echo "LAB=$lab"
    echo "NP=\"${PL_NP:-}\""
    echo "TEST_SCALE=${RUBRIC_SCALE:-}"
    echo "LIMIT=${LIMIT:-3600}"
    echo "UNCONFINED=${UNCONFINED:-0}  # 1: grade even where no sandbox can start (the submission then runs unconfined)"
} >"$stage/gradescope.conf"
# a zip whose bytes depend only on the files: fixed times, sorted names, no extra attributes
find "$stage" -exec touch -h -d '2000-01-01 00:00:00' {} +
(cd "$stage" && find . -type f | LC_ALL=C sort | sed 's|^\./||' | zip -X -q -@ ../autograder.zip)
rm -rf "$stage"
n=$(unzip -Z1 "$out/autograder.zip" | wc -l)
echo "gradescope.sh: lab $lab, $n files$( [ -n "$hidden" ] && [ -f "$hidden/$lab.rubric" ] && echo ", with the hidden rubric")"
echo "$out/autograder.zip"
