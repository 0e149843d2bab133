#!/usr/bin/env bash
# test_class.sh - a class graded end to end, the Gradescope and GitHub Classroom packages,
# and the student's report of `make lab-1`. Lab 1 at one world size (NP=2), with the rubric's
# test arguments, keeps it short (3 to 4 minutes on 2 cores):
#
#   - make grade-class on a fixture class of 18 folders (make_class_fixture.sh: the solution,
#     the starter, four of tests/broken, a crash, a thread bomb, a fork bomb, a hang, a missing
#     file, an empty folder, a 50 MB file, a binary, a symlink out, a non-UTF-8 name, two
#     near-copies) with JOBS=2, killed midway and resumed; the gradebook against the expected
#     rows; a second run from scratch beside a CPU hog (not with CLASS_LOAD=0), of the
#     folders whose verdicts load could move, gives the same rows (all but wall_s, the last column); a rerun grades
#     nothing and writes the same summary; the summary, the plot, the similar pairs;
#   - make gradescope: the zip's layout, and run_autograder in a simulated /autograder tree
#     (a temporary directory), its results.json checked against Gradescope's documented
#     format; a submission without the file;
#   - make classroom: the workflow parses as YAML and has what the autograding actions need;
#   - make lab-1: the starter's report fits in 80 lines, names the rerun command of its first
#     failure, and that command reruns exactly that case; V=1 prints every case.
# The fixture's rubric is Lab 1's without the speed rule (a measured time: the one item two
# runs could score differently) and with short timeouts, so the hang costs seconds.
# Prints "ok - ..." / "not ok - ...".
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-class.XXXXXX)
chmod 755 "$TMP"  # each grading job runs as a user of its own: it must reach its files
cleanup() {
    [ -n "${pgid:-}" ] && kill -KILL -- "-$pgid" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
CLASS=$B/tools/pl-class
START=$SECONDS

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }
jqc() { jq -e "$@" >/dev/null; }
# the python3 that has module $1: Debian's (where install-deps.sh puts its modules), else PATH's
pyfor() { for p in /usr/bin/python3 python3; do "$p" -c "import $1" 2>/dev/null && { echo "$p"; return 0; }; done; return 1; }
check() {  # check DESCRIPTION COMMAND...
    local d=$1
    shift
    if "$@"; then ok "$d"; else notok "$d"; fi
}

if ! command -v bwrap >/dev/null || ! bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true 2>/dev/null; then  # as the sandbox starts
    echo "# bubblewrap cannot start a sandbox here: grade-class runs with SANDBOX=auto"
    export SANDBOX=auto
fi
$MAKE --no-print-directory -s NO_CUDA=1 engine libs >/dev/null || { notok "the engine and pl-class build"; exit 1; }

# ---- the content hash: SHA-256 against sha256sum (the empty file, 3 bytes, 1 MB)
: >"$TMP/h0"
printf abc >"$TMP/h1"
head -c 1000000 /dev/urandom >"$TMP/h2"
for f in h0 h1 h2; do
    check "pl-class's SHA-256 of $f matches sha256sum" \
        test "$($CLASS --sha256 "$TMP/$f")" = "$(sha256sum "$TMP/$f" | cut -d' ' -f1)"
done

# ---- the fixture class and its rubric
tests/grader/make_class_fixture.sh "$TMP/class"
grep -v 'allreduce_ring.speed' grader/rubrics/01-collectives.rubric >"$TMP/lab1.rubric"
printf 'timeout 4\nwatchdog 2\n' >>"$TMP/lab1.rubric"
chmod 644 "$TMP/lab1.rubric"
grade_class() {  # grade_class OUT [make args...]
    local out=$1
    shift
    $MAKE --no-print-directory NO_CUDA=1 grade-class LAB=1 SUBMISSIONS="${SUBMISSIONS_DIR:-$TMP/class}" OUT="$out" JOBS=2 NP=2 \
        RUBRIC_SCALE=1 RUBRIC="$TMP/lab1.rubric" LIMIT=30 SIMILARITY=60 "$@"
}
graded() { ls "$1"/students/*/grade.json 2>/dev/null | wc -l; }
job_processes() { ps -eo uid= | awk '$1 >= 60100 && $1 < 60200' | wc -l; }

# ---- run 1, killed midway (the whole process group, as a lost terminal or an OOM kill would)
t0=$SECONDS
setsid bash -c "$(declare -f grade_class); MAKE='$MAKE' TMP='$TMP' grade_class '$TMP/out1'" >"$TMP/run1.log" 2>&1 &
pgid=$!
for _ in $(seq 1 600); do
    [ "$(graded "$TMP/out1")" -ge 9 ] && break
    sleep 0.2
done
kill -KILL -- "-$pgid" 2>/dev/null
wait "$pgid" 2>/dev/null
pgid=
# the jobs are process groups of their own: they get SIGTERM when pl-class dies, and stop
for _ in $(seq 1 50); do
    [ "$(job_processes)" = 0 ] && break
    sleep 0.2
done
n1=$(graded "$TMP/out1")
check "killed run: it had committed $n1 of 18 rows when killed (at least 9, fewer than 18)" test "$n1" -ge 9 -a "$n1" -lt 18
check "killed run: no process of its jobs is left ($(job_processes) found)" test "$(job_processes)" = 0

# ---- run 2: the same command continues
grade_class "$TMP/out1" >"$TMP/run2.log" 2>&1
rc=$?
check "resumed run: exit 0 (got $rc)" test $rc = 0
reused=$(sed -n 's/.* \([0-9]*\) unchanged since the last run.*/\1/p' "$TMP/run2.log")
check "resumed run: the $n1 committed rows are not graded again (reused: ${reused:-none})" test "${reused:-0}" = "$n1"
check "resumed run: every folder has a row" test "$(graded "$TMP/out1")" = 18
echo "# killed + resumed run: $((SECONDS - t0)) s"

# ---- the gradebook against the expected rows: student, status, score, an item, a failure class
book=$TMP/out1/gradebook.csv
col() {  # col NAME: the column's number in the header
    head -n 1 "$book" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1
}
row() {  # row STUDENT: the line
    grep "^$1," "$book"
}
field() {  # field STUDENT COLUMN (first 5 columns and the items never hold a comma)
    row "$1" | cut -d, -f"$(col "$2")"
}
expect_row() {  # expect_row STUDENT STATUS SCORE [COLUMN=VALUE...] [~TEXT (somewhere in the row)]
    local who=$1 st=$2 sc=$3 bad=""
    shift 3
    [ "$(field "$who" status)" = "$st" ] || bad="$bad status=$(field "$who" status)"
    [ "$(field "$who" score)" = "$sc" ] || bad="$bad score=$(field "$who" score)"
    for kv in "$@"; do
        case $kv in
        "~"*) row "$who" | grep -qF -- "${kv#\~}" || bad="$bad no '${kv#\~}'" ;;
        *) [ "$(field "$who" "${kv%%=*}")" = "${kv#*=}" ] || bad="$bad ${kv%%=*}=$(field "$who" "${kv%%=*}")" ;;
        esac
    done
    if [ -z "$bad" ]; then
        ok "gradebook: $who: $st, $sc $*"
    else
        notok "gradebook: $who: $st, $sc $* (got:$bad)"
        echo "# failures: $(field "$who" failures); reason: $(field "$who" reason); notes: $(field "$who" notes)"
        # the report: its notes, and the first case of each other outcome, with the line below it (why)
        awk '/^ *note|^  restarting/ { print; next } /^  [a-z]+ +np[0-9]/ && $1 != "pass" && !seen[$1]++ { print; getline; print }' \
            "$TMP/out1/students/$(field "$who" folder)/report.txt" 2>/dev/null | tail -n 12 | cut -c1-200 | sed 's/^/# /'
    fi
}
check "gradebook: 18 rows and a header" test "$(wc -l <"$book")" = 19
check "gradebook: the header has every rubric item, failures, reason, notes, wall_s last" \
    grep -qx 'student,folder,status,score,max_score,broadcast,reduce,allgather,reduce_scatter,allreduce_ring,allreduce_rd,allreduce,broadcast.bytes,reduce.bytes,broadcast.pipelined,reduce.pipelined,allgather.bytes,reduce_scatter.bytes,allreduce_ring.bytes,allreduce_rd.msgs,freed,failures,reason,notes,wall_s' "$book"
expect_row alice@uni.edu graded 93 "~ignored: notes.txt"
expect_row bob@uni.edu graded 0 broadcast=0 "~wrong:"
expect_row carol@uni.edu graded 74 allreduce_ring=0 allreduce_ring.bytes=0 allreduce=10 "~wrong:"
expect_row dave@uni.edu graded 90.5 allreduce_ring=14 allreduce_ring.bytes=2.5
expect_row erin@uni.edu graded 79 allgather=0 allgather.bytes=0 "~forbidden:"
expect_row frank@uni.edu graded 74 allreduce_ring=0 "~deadlock:"
expect_row grace@uni.edu graded 79 reduce_scatter=0 "~crash:2"
expect_row heidi@uni.edu refused 0 "~calls fork"
expect_row ivan@uni.edu refused 0 "~the build refused it"
expect_row judy@uni.edu "timed out" 0 "~longer than the 30 s limit"
expect_row ken@uni.edu "missing file" 0 "~no collectives.c in the submission (it holds collective.c)"
expect_row nina@uni.edu refused 0 "~52428800 bytes"
expect_row oscar@uni.edu refused 0 "~a binary file"
expect_row peggy@uni.edu refused 0 "~a symbolic link pointing outside"
expect_row submission_1015 "missing file" 0 "~the folder is empty"
expect_row 'caf%E9' graded 93 "~not UTF-8"
expect_row lab1-leo graded 93
expect_row lab1-mallory graded 93
for f in results.json junit.xml report.txt cases.json; do
    check "per student: alice has $f" test -s "$TMP/out1/students/submission_1001/$f"
done
check "per student: a missing file still has results.json and report.txt" \
    test -s "$TMP/out1/students/submission_1011/results.json" -a -s "$TMP/out1/students/submission_1011/report.txt"
check "per student: the report names where it is, not where it was written" \
    bash -c "grep -q 'students/submission_1002/report.txt' '$TMP/out1/students/submission_1002/console.txt' && ! grep -rq '\.partial' '$TMP/out1/students/submission_1002/'"

# ---- a second run from scratch beside a CPU hog (HOG busy processes, default 1 per core, at
# the grading's own priority), of the folders whose verdicts load could move: three correct
# submissions (one of them the non-UTF-8 name), a wrong result, a deadlock, a crash and a
# refusal. The hang is left out: it is a timeout however loaded the machine is, and costs
# the whole limit. Their rows must be the same as in the first run but for wall_s (the last
# column): the class grader keeps its limits on the quiet clock and runs fewer jobs while
# the hog takes the cores, so the load changes how long the grading takes, never a verdict.
# CLASS_LOAD=0 leaves this part out (make test does: a minute and a half of its 15 minutes;
# make test-load runs the whole script, and .ci/run runs that).
if [ "${CLASS_LOAD:-1}" = 0 ]; then
    echo "# the run beside a CPU hog is left out here (CLASS_LOAD=0): make test-load runs it"
else
mkdir -p "$TMP/class-load"
for f in "$TMP"/class/caf* lab1-leo submission_1001 submission_1003 submission_1006 submission_1007 \
    submission_1008 submission_metadata.yml; do
    cp -a "$TMP/class/${f##*/}" "$TMP/class-load/"
done
hogs=()
for _ in $(seq 1 "${HOG:-$(nproc)}"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
done
t0=$SECONDS
SUBMISSIONS_DIR="$TMP/class-load" grade_class "$TMP/out2" >"$TMP/run3.log" 2>&1
load=$(cut -d' ' -f1 /proc/loadavg)
kill "${hogs[@]}" 2>/dev/null
wait "${hogs[@]}" 2>/dev/null
echo "# a run from scratch of $(graded "$TMP/out2") folders beside ${#hogs[@]} busy processes: $((SECONDS - t0)) s (load average $load on $(nproc) cores)"
strip_wall() { sed 's/,[^,]*$//' "$1"; }
check "beside the hog: the 7 folders are graded" test "$(graded "$TMP/out2")" = 7
# the same rows: the hog run's, each against the first run's row of the same folder
if diff <(strip_wall "$TMP/out2/gradebook.csv") \
        <(strip_wall "$book" | awk -F, 'NR == FNR { keep[$2] = 1; next } FNR == 1 || ($2 in keep)' \
            "$TMP/out2/gradebook.csv" -) >"$TMP/diff.txt"; then
    ok "two runs (one killed and resumed, one from scratch beside a CPU hog) give the same rows, wall_s aside"
else
    notok "two runs (the second beside a CPU hog) give the same rows, wall_s aside"
    sed 's/^/# /' "$TMP/diff.txt" | head -20
fi
check "beside the hog, pl-class ran fewer jobs at once than JOBS=2 allows" \
    grep -q 'fewer at once while other work holds the cores' "$TMP/run3.log"
fi

# ---- a rerun with nothing changed grades nothing; a changed file is graded again
cp "$book" "$TMP/book.before"
mv "$TMP/out1/summary.md" "$TMP/summary.before"
grade_class "$TMP/out1" >"$TMP/run4.log" 2>&1
check "rerun: nothing to grade (18 unchanged)" grep -q ': 0 to grade .* 18 unchanged since the last run' "$TMP/run4.log"
check "rerun: the gradebook is byte for byte the same" cmp -s "$TMP/book.before" "$book"
check "rerun: summary.md, written again from the kept rows, is byte for byte the same" \
    cmp -s "$TMP/summary.before" "$TMP/out1/summary.md"

# ---- the summary, the plot, the similar pairs
md=$TMP/out1/summary.md
for s in "Score histogram" "Rubric items" "Failure classes" "Cases most often failed" "Not graded" "Similar pairs"; do
    check "summary.md: has '$s'" grep -q "^## $s" "$md"
done
check "summary.md: counts every status" grep -q '^18 submission(s): 10 graded, 2 missing file, 0 build error, 1 timed out, 5 refused' "$md"
check "summary.md: the allreduce_ring cases lead the most often failed (3 submissions)" \
    grep -q '^| np2/allreduce_ring\.[a-z]*\.c[0-9]* | 3 |$' "$md"
check "summary.png: a PNG image" bash -c "head -c 8 '$TMP/out1/summary.png' | grep -q PNG"
if command -v sim_c >/dev/null; then
    check "similarity: the near-copies lab1-leo and lab1-mallory are a pair" grep -q '^| lab1-leo, lab1-mallory | [0-9]* % |' "$md"
    check "similarity: their regions side by side" grep -q '|src/lab1-mallory.c' "$TMP/out1/similarity/lab1-leo__lab1-mallory.txt"
    check "similarity: the starter (bob) is in no pair: its own lines are excluded" bash -c "! grep '^| ' '$md' | grep -q 'bob@uni.edu.*%'"
else
    notok "similarity: sim_c is installed (Debian package similarity-tester, scripts/install-deps.sh)"
fi

cp solutions/01-collectives/collectives.c "$TMP/class/submission_1002/collectives.c"
grade_class "$TMP/out1" >"$TMP/run5.log" 2>&1
check "rerun after bob's file changed: only bob is graded" grep -q ': 1 to grade .* 17 unchanged' "$TMP/run5.log"
expect_row bob@uni.edu graded 93

# ---- bad input: one line, exit 2
$MAKE --no-print-directory NO_CUDA=1 grade-class LAB=1 >"$TMP/bad.log" 2>&1
rc=$?
check "grade-class without SUBMISSIONS: an error line, and it fails (exit $rc)" \
    bash -c "[ $rc != 0 ] && grep -q 'wants SUBMISSIONS=dir' '$TMP/bad.log'"
$CLASS --lab 01-collectives --submissions "$TMP/nowhere" --out "$TMP/out9" >"$TMP/bad2.log" 2>&1
rc=$?
check "pl-class on a missing folder: exit 2 with one line (got $rc)" \
    bash -c "[ $rc = 2 ] && [ \$(wc -l <'$TMP/bad2.log') = 1 ] && grep -q '^pl-class: error: ' '$TMP/bad2.log'"

# ---- names a spreadsheet would run as formulas (a Gradescope export's name or email can be
# one): the gradebook holds them as text, behind an apostrophe
mkdir -p "$TMP/formulas/=HYPERLINK(\"http:x\")" "$TMP/formulas/@SUM(1)" "$TMP/formulas/+1-1" "$TMP/formulas/-2"
$CLASS --lab 01-collectives --submissions "$TMP/formulas" --out "$TMP/out-formulas" --engine $B/tools/pl-grade \
    --make "$MAKE" --flavor cpu --sandbox auto --similarity 0 >"$TMP/formulas.log" 2>&1
first=$(cut -c1 "$TMP/out-formulas/gradebook.csv" 2>/dev/null | tail -n +2 | sort -u | tr -d '\n')
check "gradebook: student names that look like formulas are written as text ('=..., '@..., '+..., '-...: got first characters '$first')" \
    test "$first" = "\"'"

# ---- Gradescope: the zip, then run_autograder in a simulated /autograder
mkdir -p "$TMP/hidden"
printf 'lab 01-collectives\nrun np=2 label=seed7 --seed 7\ngroup hidden-seed 5 np*@seed7/*\n' >"$TMP/hidden/01-collectives.rubric"
chmod 700 "$TMP/hidden"
$MAKE --no-print-directory NO_CUDA=1 gradescope LAB=1 HIDDEN="$TMP/hidden" NP=2 RUBRIC_SCALE=1 LIMIT=120 \
    OUT="$TMP/gs" >"$TMP/gs.log" 2>&1
zip=$TMP/gs/autograder.zip
check "gradescope: autograder.zip built" test -s "$zip"
unzip -Z1 "$zip" >"$TMP/zip.list" 2>/dev/null
check "gradescope: setup.sh and run_autograder at the zip's root" grep -qx 'run_autograder' "$TMP/zip.list"
check "gradescope: setup.sh at the root too" grep -qx 'setup.sh' "$TMP/zip.list"
check "gradescope: the hidden rubric is inside" grep -qx 'hidden/01-collectives.rubric' "$TMP/zip.list"
check "gradescope: no solution and no test file inside (student code runs in that container)" \
    bash -c "! grep -Eq '^(solutions|tests)/' '$TMP/zip.list'"
AG=$TMP/ag
mkdir -p "$AG/source" "$AG/submission" "$AG/results"
(cd "$AG/source" && unzip -q "$zip")
cp "$AG/source/run_autograder" "$AG/run_autograder"
# the image's build step, without apt (this machine has the packages) and with this build
mkdir -p "$AG/source/build"
cp -a "$B/cpu" "$B/public.syms" "$B/tools" "$AG/source/build/"
(cd "$AG/source" && PL_SETUP_NO_APT=1 ./setup.sh) >"$TMP/setup.log" 2>&1
check "gradescope: setup.sh builds the kit (exit $?)" grep -q 'setup.sh: the kit is built' "$TMP/setup.log"
cp solutions/01-collectives/collectives.c "$AG/submission/"
printf '{"users": [{"email": "alice@uni.edu", "id": 1, "name": "Alice"}]}\n' >"$AG/submission_metadata.json"
(cd "$AG" && AUTOGRADER_ROOT="$AG" ./run_autograder) >"$TMP/ag.log" 2>&1
res=$AG/results/results.json
# Gradescope's documented format: these top-level keys only; tests with name, score,
# max_score, status passed|failed, output; visibility one of four words; the tests add up
schema() {
    jq -e '
      (keys - ["score","execution_time","output","output_format","test_output_format","test_name_format",
               "visibility","stdout_visibility","extra_data","tests","leaderboard"] | length == 0)
      and (.score | type == "number") and (.tests | type == "array")
      and all(.tests[]; (.name | type == "string") and (.score | type == "number")
              and (.max_score | type == "number") and (.status == "passed" or .status == "failed")
              and (.output | type == "string")
              and ((.visibility // "visible") | IN("hidden","after_due_date","after_published","visible"))
              and ((keys - ["score","max_score","status","name","name_format","number","output",
                            "output_format","tags","visibility","extra_data"]) | length == 0))
      and ((.score * 100 | round) == ([.tests[].score] | add * 100 | round))' "$1" >/dev/null
}
check "run_autograder: results.json follows Gradescope's documented format" schema "$res"
# ... and validates against the JSON Schema written from that documentation, which refuses
# each kind of departure from it
if ! PYJ=$(pyfor jsonschema); then
    notok "gradescope: python3-jsonschema is needed to validate results.json (apt-get install python3-jsonschema, or scripts/install-deps.sh --tests)"
else
    GS_SCHEMA=grader/gradescope/results.schema.json
    v=$($PYJ tests/grader/validate_json.py $GS_SCHEMA "$res" | head -n 1)
    check "run_autograder: results.json validates against $GS_SCHEMA (${v%% *})" test "${v%% *}" = valid
    broken_results() {  # broken_results WHAT JQ-FILTER: that change must not validate
        jq "$2" "$res" >"$TMP/broken.json"
        if ! $PYJ tests/grader/validate_json.py $GS_SCHEMA "$TMP/broken.json" >"$TMP/broken.log" 2>&1 &&
            grep -q '^invalid' "$TMP/broken.log"; then
            ok "gradescope schema: refuses $1 ($(cut -c1-100 "$TMP/broken.log" | sed "s|$TMP/||"))"
        else
            notok "gradescope schema: refuses $1 (got: $(head -n 1 "$TMP/broken.log"))"
        fi
    }
    broken_results "a test status Gradescope does not know" '.tests[0].status = "ok"'
    broken_results "a score given as text" '.score = "93"'
    broken_results "a visibility Gradescope does not know" '.tests[0].visibility = "later"'
    broken_results "a key of its own at the top" '. + {"grade": 1}'
    broken_results "a test whose max_score is negative" '.tests[0].max_score = -1'
fi
check "run_autograder: the solution scores every item in full but the timed one, the hidden item included" \
    jqc '[.tests[] | select(.name != "allreduce_ring.speed") | .score == .max_score] | all and length == 17' "$res"
check "run_autograder: the hidden item is after_published" \
    jqc '.tests[] | select(.name == "hidden-seed") | .visibility == "after_published"' "$res"
check "run_autograder: graded in the sandbox" bash -c "! grep -q 'without a sandbox' '$res'"
rm -f "$AG/submission/"*
cp solutions/01-collectives/collectives.c "$AG/submission/collective.c"
(cd "$AG" && AUTOGRADER_ROOT="$AG" ./run_autograder) >"$TMP/ag2.log" 2>&1
check "run_autograder: a misnamed file: 0 points, the reason, the same format" \
    bash -c "jq -e '.score == 0 and (.output | test(\"no collectives.c\"))' '$res' >/dev/null"
check "run_autograder: that results.json follows the format too" schema "$res"

# ---- GitHub Classroom: the workflow
$MAKE --no-print-directory classroom LAB=1 OUT="$TMP/cr" >"$TMP/cr.log" 2>&1
wf=$TMP/cr/.github/workflows/classroom.yml
# yamllint (tests/grader/yamllint.yml), then the workflow as GitHub Actions reads it:
# syntax, actions at versions that exist with their declared inputs, one test per item
# (check_workflow.py); and the checker refuses workflows that are wrong in each way.
if ! command -v yamllint >/dev/null; then
    notok "classroom: yamllint is needed to lint the workflow (apt-get install yamllint, or scripts/install-deps.sh --tests)"
else
    check "classroom: the workflow passes yamllint (strict, tests/grader/yamllint.yml)" \
        yamllint -s -c tests/grader/yamllint.yml "$wf"
fi
if ! PY=$(pyfor yaml); then
    notok "classroom: python3-yaml is needed to check the workflow (apt-get install python3-yaml, or scripts/install-deps.sh --tests)"
else
    $PY tests/grader/check_workflow.py "$wf" grader/rubrics/01-collectives.rubric >"$TMP/yaml.log" 2>&1
    check "classroom: the workflow is one GitHub Actions accepts, a test per rubric item and the reporter ($(tail -n 1 "$TMP/yaml.log"))" \
        grep -q '^valid 17 tests 100.0 points' "$TMP/yaml.log"
    bad_wf() {  # bad_wf WHAT SED-EXPRESSION EXPECTED-TEXT: a broken copy is refused, naming why
        sed "$2" "$wf" >"$TMP/bad.yml"
        $PY tests/grader/check_workflow.py "$TMP/bad.yml" grader/rubrics/01-collectives.rubric >"$TMP/badwf.log" 2>&1
        if ! grep -q '^valid' "$TMP/badwf.log" && grep -qF -- "$3" "$TMP/badwf.log"; then
            ok "classroom: the checker refuses $1 ($(head -n 1 "$TMP/badwf.log"))"
        else
            notok "classroom: the checker refuses $1 (got: $(head -n 1 "$TMP/badwf.log"))"
        fi
    }
    bad_wf "an action at a version that does not exist" 's/autograding-command-grader@v1/autograding-command-grader@v9/' 'not one known to exist'
    bad_wf "an input the action does not declare" 's/          timeout: 1/          time-limit: 1/' "has no input 'time-limit'"
    bad_wf "a result no step produces" 's/steps\.broadcast\.outputs/steps.broadcst.outputs/' 'names no step'
    bad_wf "an unquoted on: (YAML's true)" 's/^"on":/on:/' 'YAML read an unquoted on'
    bad_wf "a step with both uses and run" '0,/uses: actions\/checkout@v4/s//uses: actions\/checkout@v4\n        run: true/' 'exactly one of uses and run'
fi
mkdir -p "$TMP/itemcheck/build/grade/01-collectives" "$TMP/itemcheck/scripts"
cp scripts/classroom-item.sh "$TMP/itemcheck/scripts/"
cp "$TMP/out1/students/submission_1003/results.json" "$TMP/itemcheck/build/grade/01-collectives/"
check "classroom: an item at full points passes its test" bash -c "'$TMP/itemcheck/scripts/classroom-item.sh' 01-collectives broadcast >/dev/null"
check "classroom: an item below full points fails its test" bash -c "! '$TMP/itemcheck/scripts/classroom-item.sh' 01-collectives allreduce_ring >/dev/null"

# ---- the student's report: make lab-1 on the starter
$MAKE --no-print-directory NO_CUDA=1 lab-1 NP=2 RUBRIC_SCALE=1 >"$TMP/lab1.log" 2>&1
lines=$(wc -l <"$TMP/lab1.log")
check "make lab-1 (starter): the report fits in 80 lines ($lines)" test "$lines" -le 80
check "make lab-1: the report's last line is the score (make's own error line aside)" \
    bash -c "grep -vE '^make(\[[0-9]+\])?: \*\*\*' '$TMP/lab1.log' | tail -n 1 | grep -q '^score: 0 / 100$'"
# every case the driver plans at 2 ranks with the rubric's test arguments, one line each
planned=$("$B/cpu/labs/lab01" --list --world 2 $(sed -n 's/^test-args *\([^#]*\).*/\1/p' grader/rubrics/01-collectives.rubric) 2>/dev/null | grep -c .)
check "make lab-1: the full list of cases is in $B/reports/lab-1.txt ($planned planned)" \
    bash -c "[ $planned -gt 100 ] && [ \$(grep -cE '^  [a-z]+ +np2/' '$B/reports/lab-1.txt') = $planned ]"
rerun=$(sed -n "s/^  rerun only it: //p" "$TMP/lab1.log")
first=$(sed -n "s/^first failure: np2\/\([^ ]*\) .*/\1/p" "$TMP/lab1.log")
check "make lab-1: the first failure's rerun command ($rerun)" \
    test "$rerun" = "make lab-1 RUBRIC_SCALE=1 NP=2 T='$first'"
check "make lab-1: and the handout section it tests" grep -q "^  it tests: labs/01-collectives/README.md, section [0-9]" "$TMP/lab1.log"
eval "$MAKE --no-print-directory NO_CUDA=1 ${rerun#make }" >"$TMP/rerun.log" 2>&1
check "the rerun command runs exactly that case" \
    bash -c "grep -qE '^  np 2 +\[.*\] +1 cases, 1 failed' '$TMP/rerun.log' && [ \$(grep -cE '^  (pass|wrong) ' '$B/reports/lab-1.txt') = 1 ]"
$MAKE --no-print-directory NO_CUDA=1 lab-1 NP=2 RUBRIC_SCALE=1 V=1 >"$TMP/v1.log" 2>&1
check "make lab-1 V=1 prints every case as it runs" bash -c "[ \$(grep -cE '^  [a-z]+ +np2/' '$TMP/v1.log') = $planned ]"
# ---- what a sandboxed run reads besides its driver: Lab 2's scaling case loads a cost-model
# profile from common/profiles, which make lab-N binds into the sandbox
$MAKE --no-print-directory NO_CUDA=1 lab-2 SOLUTION=1 NP=2 RUBRIC_SCALE=1 T='scaling*' >"$TMP/lab2.log" 2>&1
check "make lab-2 in the sandbox: the scaling case reads its cost-model profile ($(grep -E '^  scaling ' "$TMP/lab2.log" | sed 's/^ *//'))" \
    grep -Eq '^  scaling +4/4 ' "$TMP/lab2.log"
echo "# test_class.sh: $((SECONDS - START)) s"
