#!/usr/bin/env bash
# test_selftest.sh - the grader against the labs themselves, through the real engine and
# mpirun. For every lab with a folder tests/broken/<lab>/:
#   - the reference solution scores full marks at the world sizes of selftest.conf;
#   - the untouched starter scores 0 and nothing hangs;
#   - every deliberately broken implementation tests/broken/<lab>/*.c is caught:
#       // expect: CLASS GLOB     some case matching GLOB is classified CLASS
#                                 (wrong, forbidden, crash, deadlock, timeout, error)
#       // expect: pass GLOB      every case passes, and then
#       // expect-perf: RULE      the rubric's performance rule RULE scores below its maximum
#     A broken file includes the solution and replaces one function (see the files).
# Lab 0 (nothing to implement) must score full marks at 2 and 3 ranks.
# The student's view (--brief, what `make lab-N` prints) of the starter fits in 80 lines and
# of the solution in 40, counted at the rubric's world sizes: the runs here use fewer, and
# each world size adds exactly one progress line, so the count adds the missing ones.
# Prints "ok - ..." / "not ok - ..." per check.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-selftest.XXXXXX)
# SELFTEST_KEEP=DIR keeps each grading's cases.json as DIR/<lab>-<name>.json, to compare
# two versions of the grader case by case (tests/grader/compare_cases.sh).
keep_cases() {
    [ -n "${SELFTEST_KEEP:-}" ] || return 0
    mkdir -p "$SELFTEST_KEEP"
    for d in "$TMP"/*/; do [ -f "$d/cases.json" ] && cp "$d/cases.json" "$SELFTEST_KEEP/$(basename "$d").json"; done
}
trap 'keep_cases; rm -rf "$TMP"' EXIT
ENGINE=$B/tools/pl-grade

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }

# "case classification" per line, from the engine's cases.json
classes() { awk -F'"' '/"case":/ {c=$4} /"classification":/ {print c, $4}' "$1"; }

grade() { # grade LAB NAME SRC-DIR-OR-FILE NP [extra engine args...] -> $TMP/LAB-NAME.{log,rc}
    local lab=$1 name=$2 src=$3 np=$4; shift 4
    local bin=$B/cpu/selftest/$lab/$name/driver srcarg
    if [ -d "$src" ]; then srcarg="SRC=$src"; else srcarg="SRCFILES=$src"; fi
    timeout 600 $ENGINE --lab "$lab" --rubric "grader/rubrics/$lab.rubric" --driver "$bin" \
        --build "$MAKE --no-print-directory -s B=$B driver LAB=$lab $srcarg FLAVOR=cpu BIN=$bin" \
        --mpirun "$MPIRUN" --np "$np" --test-scale --out "$TMP/$lab-$name" ${VIEW:---quiet} "$@" \
        >"$TMP/$lab-$name.log" 2>&1
    echo $? >"$TMP/$lab-$name.rc"
}

full_marks() { # full_marks LAB NAME DESCRIPTION
    local log="$TMP/$1-$2.log" rc score
    rc=$(cat "$TMP/$1-$2.rc")
    score=$(tail -n 1 "$log")
    if [ "$rc" = 0 ] && echo "$score" | grep -qE '^score: ([0-9.]+) / \1$'; then
        ok "$3 ($score)"
    else
        notok "$3 (got '$score', exit $rc)"
        grep -E "^ +(wrong|crash|timeout|deadlock|error|forbidden|build)" "$log" | head -5 | sed 's/^/# /'
    fi
}

conf() { sed -n "s/^$2 *//p" "tests/broken/$1/selftest.conf" 2>/dev/null | head -n 1; }

# view_fits LAB NAME RUN-NP MAX WHAT: the brief console's lines, at the rubric's world sizes
view_fits() {
    local log="$TMP/$1-$2.log" lines rub_np run_np total
    lines=$(wc -l <"$log")
    rub_np=$(sed -n 's/#.*//; s/^np[[:space:]]//p' "grader/rubrics/$1.rubric" | wc -w)
    run_np=$(echo $3 | wc -w)
    total=$((lines + rub_np - run_np))
    if [ "$total" -le "$4" ]; then
        ok "$1: the $5's report by default fits in $4 lines ($total at the rubric's $rub_np world sizes)"
    else
        notok "$1: the $5's report by default fits in $4 lines ($total at the rubric's $rub_np world sizes)"
        sed 's/^/# /' "$log" | head -n 100
    fi
}

# Lab 0 has nothing to implement: its program must score full marks.
if [ -d labs/00-hello ] && { [ -z "${SELFTEST_LABS:-}" ] || [[ " $SELFTEST_LABS " == *" 00-hello "* ]]; }; then
    VIEW=--brief grade 00-hello hello labs/00-hello "2 3"
    full_marks 00-hello hello "lab 0 (hello) scores full marks at 2 and 3 ranks"
    view_fits 00-hello hello "2 3" 40 "program"
fi

# SELFTEST_LABS="01-collectives 06-ddp" limits the run to those labs (a lab's own check).
for dir in tests/broken/*/; do
    lab=$(basename "$dir")
    if [ -n "${SELFTEST_LABS:-}" ] && [[ " $SELFTEST_LABS " != *" $lab "* ]]; then continue; fi
    [ -f "grader/rubrics/$lab.rubric" ] || { notok "$lab: has a rubric"; continue; }
    sol_np=$(conf "$lab" solution-np); start_np=$(conf "$lab" starter-np); broken_np=$(conf "$lab" broken-np)
    : "${sol_np:=1 2 4}" "${start_np:=1 2}" "${broken_np:=2 3}"

    VIEW=--brief grade "$lab" solution "solutions/$lab" "$sol_np"
    full_marks "$lab" solution "$lab: the solution scores full marks at world sizes $sol_np"
    view_fits "$lab" solution "$sol_np" 40 solution
    for f in results.json junit.xml cases.json; do
        [ -s "$TMP/$lab-solution/$f" ] && ok "$lab: the solution run wrote $f" || notok "$lab: the solution run wrote $f"
    done
    $B/tools/jsoncheck "$TMP/$lab-solution/results.json" score max_score tests \
        && ok "$lab: results.json is Gradescope-shaped (score, max_score, tests)" \
        || notok "$lab: results.json is Gradescope-shaped"

    start=$SECONDS
    VIEW=--brief grade "$lab" starter "labs/$lab" "$start_np"
    score=$(tail -n 1 "$TMP/$lab-starter.log")
    rc=$(cat "$TMP/$lab-starter.rc")
    if [ "$rc" = 1 ] && echo "$score" | grep -qE '^score: 0 / [0-9.]+$'; then
        ok "$lab: the starter scores 0 without hanging ($score, exit $rc, $((SECONDS - start)) s)"
    else
        notok "$lab: the starter scores 0 without hanging (got '$score', exit $rc)"
    fi
    if classes "$TMP/$lab-starter/cases.json" | grep -qvE " (pass|wrong|error)$"; then
        notok "$lab: starter cases are pass/wrong/error, never a crash, timeout or deadlock"
    else
        ok "$lab: starter cases are pass/wrong/error, never a crash, timeout or deadlock"
    fi
    view_fits "$lab" starter "$start_np" 80 starter
    if grep -q "^  rerun only it: .* --np [0-9]* --filter '" "$TMP/$lab-starter.log" \
        && grep -q "^  it tests: labs/$lab/README.md, section " "$TMP/$lab-starter.log"; then
        ok "$lab: the starter's report names the first failure's rerun command and handout section"
    else
        notok "$lab: the starter's report names the first failure's rerun command and handout section"
    fi

    nbroken=0
    for f in "$dir"*.c; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .c)
        expect=$(sed -n 's|^// expect: ||p' "$f" | head -n 1)
        [ -n "$expect" ] || { notok "$lab/$name: has an '// expect:' line"; continue; }
        cls=${expect%% *}
        glob=${expect#* }
        nbroken=$((nbroken + 1))
        grade "$lab" "$name" "$f" "$broken_np" --filter "$glob"
        rc=$(cat "$TMP/$lab-$name.rc")
        score=$(tail -n 1 "$TMP/$lab-$name.log")
        if [ "$rc" = 0 ]; then
            notok "$lab/$name: caught (it scored full marks: $score)"
            continue
        fi
        if [ "$cls" = pass ]; then
            rule=$(sed -n 's|^// expect-perf: ||p' "$f" | head -n 1)
            rule=${rule%% *}
            line=$(grep -E "^ +$rule +[0-9.]+/[0-9.]+ " "$TMP/$lab-$name.log" | head -n 1)
            got=$(echo "$line" | awk '{split($2, a, "/"); print (a[1] < a[2]) ? "below" : "full"}')
            bad=$(classes "$TMP/$lab-$name/cases.json" | grep -vc " pass$")
            if [ "$bad" = 0 ] && [ "$got" = below ]; then
                ok "$lab/$name: results correct, caught by $rule:$(echo "$line" | sed 's/^ *[^ ]*//')"
            else
                notok "$lab/$name: results correct, caught by $rule ($bad non-pass cases; '$line')"
            fi
            continue
        fi
        hit=$(classes "$TMP/$lab-$name/cases.json" | awk -v c="$cls" '$2 == c {print $1; exit}')
        if [ -n "$hit" ]; then
            ok "$lab/$name: caught as $cls ($hit), $score"
        else
            notok "$lab/$name: caught as $cls (seen: $(classes "$TMP/$lab-$name/cases.json" | awk '{print $2}' | sort | uniq -c | tr '\n' ' '))"
        fi
    done
    [ "$nbroken" -ge 6 ] && ok "$lab: $nbroken broken implementations checked" || notok "$lab: at least 6 broken implementations ($nbroken)"
done
