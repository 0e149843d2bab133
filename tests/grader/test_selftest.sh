#!/usr/bin/env bash
# test_selftest.sh - the grader against Lab 1 itself, through the real engine and mpirun:
#   - the reference solution scores full marks at every world size 1..8;
#   - the untouched starter scores 0 and nothing hangs;
#   - every deliberately broken implementation in tests/broken/01-collectives is caught,
#     with the classification its `// expect:` line names.
# Prints "ok - ..." / "not ok - ..." per check.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-selftest.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
ENGINE=build/tools/pl-grade
LAB=01-collectives
RUBRIC=grader/rubrics/$LAB.rubric

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }

# "case classification" per line, from the engine's cases.json
classes() { awk -F'"' '/"case":/ {c=$4} /"classification":/ {print c, $4}' "$1"; }

grade() { # grade NAME SRC-OR-FILE NP [extra engine args...] -> $TMP/NAME.{log,rc}, $TMP/NAME/
    local name=$1 src=$2 np=$3; shift 3
    local bin=build/cpu/selftest/$name/lab01 srcarg
    if [ -d "$src" ]; then srcarg="SRC=$src"; else srcarg="SRCFILES=$src"; fi
    timeout 600 $ENGINE --lab $LAB --rubric $RUBRIC --driver "$bin" \
        --build "$MAKE --no-print-directory -s driver LAB=$LAB $srcarg FLAVOR=cpu BIN=$bin" \
        --mpirun "$MPIRUN" --np "$np" --test-scale --out "$TMP/$name" --quiet "$@" >"$TMP/$name.log" 2>&1
    echo $? >"$TMP/$name.rc"
}

# The solution: full marks at 1..8 ranks.
grade solution solutions/$LAB "1 2 3 4 5 6 7 8"
score=$(tail -n 1 "$TMP/solution.log")
if [ "$(cat "$TMP/solution.rc")" = 0 ] && [ "$score" = "score: 100 / 100" ]; then
    ok "solution scores full marks at world sizes 1-8 ($score)"
else
    notok "solution scores full marks at world sizes 1-8 (got '$score', exit $(cat "$TMP/solution.rc"))"
    grep -E "^ +(wrong|crash|timeout|deadlock|error|forbidden)" "$TMP/solution.log" | head -5 | sed 's/^/# /'
fi
for f in results.json junit.xml cases.json; do
    [ -s "$TMP/solution/$f" ] && ok "solution run wrote $f" || notok "solution run wrote $f"
done
build/tools/jsoncheck "$TMP/solution/results.json" score max_score tests && ok "results.json is Gradescope-shaped JSON (score, max_score, tests)" || notok "results.json is Gradescope-shaped JSON"

# The starter: zero, cleanly, at a few world sizes.
start=$SECONDS
grade starter labs/$LAB "1 3 4"
score=$(tail -n 1 "$TMP/starter.log")
rc=$(cat "$TMP/starter.rc")
if [ "$rc" = 1 ] && [ "$score" = "score: 0 / 100" ]; then
    ok "starter scores 0 without hanging ($score, exit $rc, $((SECONDS - start)) s)"
else
    notok "starter scores 0 without hanging (got '$score', exit $rc)"
fi
if classes "$TMP/starter/cases.json" | grep -qvE " (pass|wrong)$"; then
    notok "starter: every case is pass (empty) or wrong, never a crash/timeout/deadlock"
else
    ok "starter: every case is pass (empty) or wrong, never a crash/timeout/deadlock"
fi

# The broken implementations.
nbroken=0
for f in tests/broken/$LAB/*.c; do
    name=$(basename "$f" .c)
    expect=$(sed -n 's|^// expect: ||p' "$f" | head -n 1)
    cls=${expect%% *}
    glob=${expect#* }
    [ -n "$expect" ] || { notok "$name: has an '// expect:' line"; continue; }
    nbroken=$((nbroken + 1))
    # Odd and even world sizes: folds, remainders and roots all show up.
    grade "$name" "$f" "3 4" --filter "$glob"
    rc=$(cat "$TMP/$name.rc")
    score=$(tail -n 1 "$TMP/$name.log")
    if [ "$rc" = 0 ]; then
        notok "$name: caught (it scored full marks: $score)"
        continue
    fi
    if [ "$cls" = pass ]; then
        # Correct results, so the catch must come from a performance rule.
        perf=$(sed -n 's|^// expect-perf: ||p' "$f" | head -n 1)
        metric=${perf%% *}
        line=$(grep -E "^ +[a-z_]+\.(bytes|msgs|speed) " "$TMP/$name.log" | grep -v " \([0-9.]*\)/\1 " | head -n 1)
        bad=$(classes "$TMP/$name/cases.json" | grep -vc " pass$")
        if [ "$bad" = 0 ] && grep -qE "^ +[a-z_]+\.bytes +[0-9.]+/[0-9]+ +bytes 2\.00x optimum" "$TMP/$name.log"; then
            ok "$name: results correct, caught by the $metric rule: $(grep -E '^ +[a-z_]+\.bytes +[0-9.]+/[0-9]+ +bytes 2' "$TMP/$name.log" | sed 's/^ *//')"
        else
            notok "$name: caught by the bytes rule as 2x optimum ($bad non-pass cases; $line)"
        fi
        continue
    fi
    hit=$(classes "$TMP/$name/cases.json" | awk -v c="$cls" '$2 == c {print $1; exit}')
    if [ -n "$hit" ]; then
        ok "$name: caught as $cls ($hit), $score"
    else
        notok "$name: caught as $cls (classifications seen: $(classes "$TMP/$name/cases.json" | awk '{print $2}' | sort | uniq -c | tr '\n' ' '))"
    fi
done
[ "$nbroken" -ge 8 ] && ok "at least 8 broken implementations are checked ($nbroken)" || notok "at least 8 broken implementations ($nbroken)"
