#!/usr/bin/env bash
# test_selftest.sh - the grader against the labs themselves, through the real engine and
# mpirun. For every lab with a folder tests/broken/<lab>/:
#   - the reference solution scores full marks at the world sizes of selftest.conf;
#   - the untouched starter scores 0 and nothing hangs;
#   - every deliberately broken implementation tests/broken/<lab>/*.c is caught:
#       // expect: CLASS GLOB     some case matching GLOB is classified CLASS
#                                 (wrong, forbidden, crash, deadlock, timeout, error)
#       // expect: full GLOB      a correct alternative: every case GLOB selects passes, and
#                                 every item those cases reach keeps its points
#       // expect: pass GLOB      every case passes, and then
#       // expect-perf: RULE      the rubric's performance rule RULE scores below its maximum
#       // np: 3                   graded at these world sizes instead of the lab's broken-np
#       // expect-message: TEXT    the report (cases.json or the console) contains TEXT
#     A broken file includes the solution and replaces one function (see the files).
# Lab 0 (nothing to implement) must score full marks at 2 and 3 ranks.
# The AddressSanitizer flavour (make SANITIZE=address, build/asan/): every lab's solution at
# one world size (SELFTEST_ASAN_NP, default 2), every case passing (a sanitizer finding
# aborts the rank: a crash); and tests/grader/asan/*.c, faults only the sanitizer sees, each
# caught with its class there and passing in the plain flavour. SELFTEST_ASAN=0 leaves it out
# (make test does: it would take a minute and a half of its 15), SELFTEST_ASAN=only runs it
# alone (make test-asan, which .ci/run runs).
# The student's view (--brief, what `make lab-N` prints) of the starter fits in 80 lines and
# of the solution in 40, counted at the rubric's world sizes: the runs here use fewer, and
# each world size adds exactly one progress line, so the count adds the missing ones.
# The gradings run SELFTEST_JOBS at a time (default 3: a grading waits on process start-up
# and watchdogs about half its time; on 2 cores, 3 at once keep about 1.5 of them busy and
# the whole part took 214 s against 272 s two at a time); the checks are printed
# afterwards, in order.
# Prints "ok - ..." / "not ok - ..." per check.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-selftest.XXXXXX)
# results.json against grader/gradescope/results.schema.json: Debian's python3-jsonschema
# (scripts/install-deps.sh --tests), else the python3 on PATH if it has the module
PYJ=""
for p in /usr/bin/python3 python3; do "$p" -c 'import jsonschema' 2>/dev/null && { PYJ=$p; break; }; done
[ -n "$PYJ" ] || echo "not ok - python3-jsonschema is needed to validate results.json (apt-get install python3-jsonschema, or scripts/install-deps.sh --tests)"
# SELFTEST_KEEP=DIR keeps each grading's cases.json as DIR/<lab>-<name>.json, to compare
# two versions of the grader case by case (tests/grader/compare_cases.sh).
keep_cases() {
    [ -n "${SELFTEST_KEEP:-}" ] || return 0
    mkdir -p "$SELFTEST_KEEP"
    for d in "$TMP"/*/; do [ -f "$d/cases.json" ] && cp "$d/cases.json" "$SELFTEST_KEEP/$(basename "$d").json"; done
}
# On exit: the slowest gradings, as '# took: SECONDS s LAB/NAME at np NP' lines.
trap 'kill $(jobs -p) 2>/dev/null; wait; keep_cases; [ -f "$TMP/times" ] && sort -rn "$TMP/times" | head -n 8 | sed "s/^/# took: /"; rm -rf "$TMP"' EXIT
: "${SELFTEST_JOBS:=3}"
ENGINE=$B/tools/pl-grade

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }

# "case classification" per line, from the engine's cases.json
classes() { awk -F'"' '/"case":/ {c=$4} /"classification":/ {print c, $4}' "$1"; }
# "# case: class: detail" for each case that did not pass, from the engine's cases.json
failures() {
    awk '/"case":/ {c=$0; sub(/^[^:]*:[ \t]*/, "", c)} /"classification":/ {k=$0; sub(/^[^:]*:[ \t]*/, "", k)}
         /"detail":/ {d=$0; sub(/^[^:]*:[ \t]*/, "", d); if (k != "\"pass\",") print "# " c " " k " " d}' "$1" 2>/dev/null | head -n "${2:-3}"
}

expect_message() { # expect_message LAB NAME FILE: the report says the file's '// expect-message:'
    local msg
    msg=$(sed -n 's|^// expect-message: ||p' "$3" | head -n 1)
    [ -n "$msg" ] || return 0
    if grep -qF -- "$msg" "$TMP/$1-$2/cases.json" "$TMP/$1-$2.log" 2>/dev/null; then
        ok "$1/$2: the report says '$msg'"
    else
        notok "$1/$2: the report says '$msg'"
    fi
}

grade() { # grade LAB NAME SRC-DIR-OR-FILE NP [extra engine args...] -> $TMP/LAB-NAME.{log,rc}
    local lab=$1 name=$2 src=$3 np=$4; shift 4
    local bin=$B/cpu/selftest/$lab/$name/driver srcarg t0=$SECONDS
    if [ -d "$src" ]; then srcarg="SRC=$src"; else srcarg="SRCFILES=$src"; fi
    timeout 600 $ENGINE --lab "$lab" --rubric "grader/rubrics/$lab.rubric" --driver "$bin" \
        --build "$MAKE --no-print-directory -s B=$B driver LAB=$lab $srcarg FLAVOR=cpu BIN=$bin" \
        --mpirun "$MPIRUN" --np "$np" --test-scale --out "$TMP/$lab-$name" ${VIEW:---quiet} "$@" \
        >"$TMP/$lab-$name.log" 2>&1
    echo $? >"$TMP/$lab-$name.rc"
    echo $((SECONDS - t0)) >"$TMP/$lab-$name.secs"
    echo "$((SECONDS - t0)) s $lab/$name at np $np" >>"$TMP/times"
}

queue() { # queue GRADE-ARGS...: grade in the background, SELFTEST_JOBS at a time
    while [ "$(jobs -rp | wc -l)" -ge "$SELFTEST_JOBS" ]; do wait -n; done
    grade "$@" &
}

# grade_asan LAB NAME SRC NP [engine args...]: as grade, in the AddressSanitizer flavour
grade_asan() {
    local lab=$1 name=asan-$2 src=$3 np=$4 bin=build/asan/cpu/selftest/$1/$2/driver srcarg t0=$SECONDS
    shift 4
    if [ -d "$src" ]; then srcarg="SRC=$src"; else srcarg="SRCFILES=$src"; fi
    { cat "grader/rubrics/$lab.rubric"; echo "memory-limit 65536G"; } >"$TMP/$lab-$name.rubric"
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_odr_violation=0:disable_coredump=0 \
    timeout 600 $ENGINE --lab "$lab" --rubric "$TMP/$lab-$name.rubric" --driver "$bin" \
        --build "$MAKE --no-print-directory -s SANITIZE=address driver LAB=$lab $srcarg FLAVOR=cpu BIN=$bin" \
        --mpirun "$MPIRUN" --np "$np" --test-scale --out "$TMP/$lab-$name" --quiet "$@" >"$TMP/$lab-$name.log" 2>&1
    echo $? >"$TMP/$lab-$name.rc"
    echo "$((SECONDS - t0)) s $lab/$name at np $np" >>"$TMP/times"
}
queue_asan() {
    while [ "$(jobs -rp | wc -l)" -ge "$SELFTEST_JOBS" ]; do wait -n; done
    grade_asan "$@" &
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
        failures "$TMP/$1-$2/cases.json"
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
: "${SELFTEST_ASAN:=1}" "${SELFTEST_ASAN_NP:=2}"
plain=yes
[ "$SELFTEST_ASAN" = only ] && plain=
if [ -n "$plain" ] && [ -d labs/00-hello ] && { [ -z "${SELFTEST_LABS:-}" ] || [[ " $SELFTEST_LABS " == *" 00-hello "* ]]; }; then
    VIEW=--brief queue 00-hello hello labs/00-hello "2 3"
    wait
    full_marks 00-hello hello "lab 0 (hello) scores full marks at 2 and 3 ranks"
    view_fits 00-hello hello "2 3" 40 "program"
fi

# SELFTEST_LABS="01-collectives 06-ddp" limits the run to those labs (a lab's own check).
want() { [ -z "${SELFTEST_LABS:-}" ] || [[ " $SELFTEST_LABS " == *" $1 "* ]]; }
nps() { # nps LAB: "SOLUTION-NP|STARTER-NP|BROKEN-NP" from the lab's selftest.conf
    local a b c
    a=$(conf "$1" solution-np); b=$(conf "$1" starter-np); c=$(conf "$1" broken-np)
    echo "${a:-1 2 4}|${b:-1 2}|${c:-2 3}"
}
expect_of() { sed -n 's|^// expect: ||p' "$1" | head -n 1; }

# Every grading first, SELFTEST_JOBS at a time (each writes $TMP/LAB-NAME.{log,rc}); the
# sanitizer flavour's library is built meanwhile, as one of the jobs
asan_build=
if [ "$SELFTEST_ASAN" != 0 ]; then
    $MAKE --no-print-directory -s SANITIZE=address libs build/asan/public.syms >"$TMP/asan-build.log" 2>&1 &
    asan_build=$!
fi
for dir in tests/broken/*/; do
    lab=$(basename "$dir")
    [ -n "$plain" ] && want "$lab" && [ -f "grader/rubrics/$lab.rubric" ] || continue
    IFS='|' read -r sol_np start_np broken_np <<<"$(nps "$lab")"
    VIEW=--brief queue "$lab" solution "solutions/$lab" "$sol_np"
    VIEW=--brief queue "$lab" starter "labs/$lab" "$start_np"
    for f in "$dir"*.c; do
        [ -f "$f" ] || continue
        expect=$(expect_of "$f")
        [ -n "$expect" ] || continue
        np=$(sed -n 's|^// np: ||p' "$f" | head -n 1)
        queue "$lab" "$(basename "$f" .c)" "$f" "${np:-$broken_np}" --filter "${expect#* }"
    done
done
asan_ok=
if [ -n "$asan_build" ]; then
    wait "$asan_build" && asan_ok=yes
    for dir in tests/broken/*/; do
        lab=$(basename "$dir")
        want "$lab" && [ -n "$asan_ok" ] || continue
        queue_asan "$lab" solution "solutions/$lab" "$SELFTEST_ASAN_NP"
    done
    for f in tests/grader/asan/*.c; do
        [ -f "$f" ] && [ -n "$asan_ok" ] || continue
        lab=$(sed -n 's|^// lab: ||p' "$f" | head -n 1) expect=$(expect_of "$f")
        want "$lab" || continue
        queue_asan "$lab" "$(basename "$f" .c)" "$f" "$SELFTEST_ASAN_NP" --filter "${expect#* }"
        queue "$lab" "plain-$(basename "$f" .c)" "$f" "$SELFTEST_ASAN_NP" --filter "${expect#* }"
    done
fi
wait

# Then the checks, lab by lab
for dir in tests/broken/*/; do
    lab=$(basename "$dir")
    [ -n "$plain" ] && want "$lab" || continue
    [ -f "grader/rubrics/$lab.rubric" ] || { notok "$lab: has a rubric"; continue; }
    IFS='|' read -r sol_np start_np broken_np <<<"$(nps "$lab")"

    full_marks "$lab" solution "$lab: the solution scores full marks at world sizes $sol_np"
    view_fits "$lab" solution "$sol_np" 40 solution
    for f in results.json junit.xml cases.json; do
        [ -s "$TMP/$lab-solution/$f" ] && ok "$lab: the solution run wrote $f" || notok "$lab: the solution run wrote $f"
    done
    $B/tools/jsoncheck "$TMP/$lab-solution/results.json" score extra_data tests \
        && ok "$lab: results.json is Gradescope-shaped (score, tests, the maximum in extra_data)" \
        || notok "$lab: results.json is Gradescope-shaped"
    if [ -n "$PYJ" ]; then
        v=$($PYJ tests/grader/validate_json.py grader/gradescope/results.schema.json "$TMP/$lab-solution/results.json" | head -n 1)
        [[ $v == valid* ]] && ok "$lab: results.json validates against Gradescope's schema" \
            || notok "$lab: results.json validates against Gradescope's schema (${v#* })"
    fi

    # which perf items say they rest on the player's own counters: of Lab 1's, only freed (the
    # player's memory accounting; the referees moved and counted its traffic), and Lab 4's
    # bubble (its trace) still does
    words=$(python3 -c 'import json, sys
print(" ".join(t["name"] for t in json.load(open(sys.argv[1]))["tests"] if "evidence: counted inside" in t.get("output", "")))' \
        "$TMP/$lab-solution/results.json" 2>/dev/null)
    case $lab in
    01-collectives) [ "$words" = freed ] && ok "$lab: no traffic item rests on the player's word (the referees counted it; freed says it does)" \
        || notok "$lab: perf items on the player's word: '$words' (only freed expected)" ;;
    04-pipeline) [[ $words == *bubble* ]] && ok "$lab: the bubble item says it rests on the player's trace ($words)" \
        || notok "$lab: the bubble item does not say it rests on the player's trace (got '$words')" ;;
    esac

    score=$(tail -n 1 "$TMP/$lab-starter.log")
    rc=$(cat "$TMP/$lab-starter.rc")
    if [ "$rc" = 1 ] && echo "$score" | grep -qE '^score: 0 / [0-9.]+$'; then
        ok "$lab: the starter scores 0 without hanging ($score, exit $rc, $(cat "$TMP/$lab-starter.secs") s)"
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
        grep -E "^(first failure|  it tests|  rerun only it|np [0-9]+:)" "$TMP/$lab-starter.log" | head -n 8 | sed 's/^/# /'
        failures "$TMP/$lab-starter/cases.json" 2
    fi

    nbroken=0
    for f in "$dir"*.c; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .c)
        expect=$(expect_of "$f")
        [ -n "$expect" ] || { notok "$lab/$name: has an '// expect:' line"; continue; }
        cls=${expect%% *}
        if [ "$cls" = full ]; then # a correct alternative: every case it runs passes (the
            rc=$(cat "$TMP/$lab-$name.rc") # filtered run's exit is 1: a partial score)
            bad=$(classes "$TMP/$lab-$name/cases.json" | grep -vc " pass$")
            n=$(classes "$TMP/$lab-$name/cases.json" | grep -c " pass$")
            # ... and every item its cases reach keeps its points (performance and rules too)
            short=$(awk '/^summary for lab/ {s = 1; next} /^score:/ {s = 0}
                         s && /^  [a-z]/ && !/no cases (ran|report)/ {split($2, a, "/"); if (a[1] + 0 < a[2] + 0) printf " %s %s", $1, $2}' \
                    "$TMP/$lab-$name.log")
            if [ "$rc" -le 1 ] && [ "$bad" = 0 ] && [ "$n" -gt 0 ] && [ -z "$short" ]; then
                ok "$lab/$name: a correct alternative keeps every point ($n cases pass, every item they reach full)"
            else
                notok "$lab/$name: a correct alternative keeps every point (exit $rc, $bad cases not passing, items short:${short:- none}: $(tail -n 1 "$TMP/$lab-$name.log"))"
                failures "$TMP/$lab-$name/cases.json"
            fi
            continue
        fi
        nbroken=$((nbroken + 1))
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
            # the rule measured the fault: not a parent that failed or did not run
            if [ "$bad" = 0 ] && [ "$got" = below ] && ! echo "$line" | grep -qE "parent |no cases"; then
                ok "$lab/$name: results correct, caught by $rule:$(echo "$line" | sed 's/^ *[^ ]*//')"
            else
                notok "$lab/$name: results correct, caught by $rule ($bad non-pass cases; '$line')"
            fi
            expect_message "$lab" "$name" "$f"
            continue
        fi
        hit=$(classes "$TMP/$lab-$name/cases.json" | awk -v c="$cls" '$2 == c {print $1; exit}')
        if [ -n "$hit" ]; then
            ok "$lab/$name: caught as $cls ($hit), $score"
        else
            notok "$lab/$name: caught as $cls (seen: $(classes "$TMP/$lab-$name/cases.json" | awk '{print $2}' | sort | uniq -c | tr '\n' ' '))"
            failures "$TMP/$lab-$name/cases.json"
        fi
        expect_message "$lab" "$name" "$f"
    done
    [ "$nbroken" -ge 6 ] && ok "$lab: $nbroken broken implementations checked" || notok "$lab: at least 6 broken implementations ($nbroken)"
done

# The AddressSanitizer flavour
if [ -n "$asan_build" ]; then
    if [ -z "$asan_ok" ]; then
        notok "the AddressSanitizer flavour builds (make SANITIZE=address libs): $(tail -n 3 "$TMP/asan-build.log" | tr '\n' ' ')"
    else
        for dir in tests/broken/*/; do
            lab=$(basename "$dir")
            want "$lab" || continue
            ran=$(classes "$TMP/$lab-asan-solution/cases.json" 2>/dev/null | wc -l)
            bad=$(classes "$TMP/$lab-asan-solution/cases.json" 2>/dev/null | grep -vc " pass$")
            if [ "$ran" -gt 0 ] && [ "$bad" = 0 ]; then
                ok "$lab: in the AddressSanitizer flavour at np $SELFTEST_ASAN_NP, every case of the solution passes ($ran)"
            else
                notok "$lab: in the AddressSanitizer flavour at np $SELFTEST_ASAN_NP, every case of the solution passes ($ran ran, $bad not: $(classes "$TMP/$lab-asan-solution/cases.json" 2>/dev/null | grep -v ' pass$' | head -n 2 | tr '\n' ' '))"
                failures "$TMP/$lab-asan-solution/cases.json"
                [ "$ran" -gt 0 ] || tail -n 4 "$TMP/$lab-asan-solution.log" | sed 's/^/# /'
            fi
        done
        for f in tests/grader/asan/*.c; do
            [ -f "$f" ] || continue
            lab=$(sed -n 's|^// lab: ||p' "$f" | head -n 1) expect=$(expect_of "$f") name=$(basename "$f" .c)
            want "$lab" || continue
            cls=${expect%% *}
            hit=$(classes "$TMP/$lab-asan-$name/cases.json" 2>/dev/null | awk -v c="$cls" '$2 == c {print $1; exit}')
            plain_bad=$(classes "$TMP/$lab-plain-$name/cases.json" 2>/dev/null | grep -vc " pass$")
            plain_ran=$(classes "$TMP/$lab-plain-$name/cases.json" 2>/dev/null | wc -l)
            if [ -n "$hit" ] && [ "$plain_ran" -gt 0 ] && [ "$plain_bad" = 0 ]; then
                ok "$lab/$name: caught as $cls in the AddressSanitizer flavour ($hit); its $plain_ran cases pass in the plain one"
            else
                notok "$lab/$name: caught as $cls in the AddressSanitizer flavour (seen: $(classes "$TMP/$lab-asan-$name/cases.json" 2>/dev/null | awk '{print $2}' | sort | uniq -c | tr '\n' ' ')), passing in the plain one ($plain_bad of $plain_ran not)"
            fi
        done
    fi
fi
