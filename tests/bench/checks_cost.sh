#!/usr/bin/env bash
# tests/bench/checks_cost.sh - what the grader's checks cost, measured side by side in one
# run. A graded run (pl-grade, make lab-N) always turns on deferred streams (PL_STREAMS=
# deferred) and red zones (PL_CHECKED=1) in the player; a driver started by hand under
# mpirun turns on what its environment asks for. So each lab's reference-solution driver,
# with the rubric's test arguments, runs here:
#
#   eager               the driver alone, streams eager, no red zones (the baseline)
#   deferred            PL_STREAMS=deferred
#   checked             PL_CHECKED=1
#   deferred+checked    both: what a graded run's player does
#   asan                the AddressSanitizer flavour (build/asan/), both checks on
#   graded              make lab-N SOLUTION=1 RUBRIC_SCALE=1: the engine, the sandbox, the
#                       referee's reports, both checks - what a student waits for
#
# the modes in turn, REPS rounds, the median wall time of each, printed as ratio lines
# (mode / eager). Nothing is asserted: the numbers are for reading.
#
#   tests/bench/checks_cost.sh                       # labs 1-9 at NP=2, 3 rounds
#   LABS="1 4" NP=3 REPS=5 tests/bench/checks_cost.sh
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${MPIRUN:=mpirun}" "${LABS:=1 2 3 4 5 6 7 8 9}" "${NP:=2}" "${REPS:=3}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
unset PL_STREAMS PL_CHECKED
MODES="eager deferred checked deferred+checked asan graded"
out=$(mktemp /tmp/checks_cost.XXXXXX)
trap 'rm -rf "$out" "$out.grade"' EXIT

lab_name() { ls -d grader/rubrics/"$(printf %02d "$1")"-*.rubric 2>/dev/null | head -n 1 | xargs -r basename | sed 's/\.rubric$//'; }
now() { date +%s.%N; }

run() { # run LAB MODE -> seconds, or "fail"
    local lab=$1 mode=$2 name drv args s rc
    name=$(lab_name "$lab")
    drv=build/cpu/solutions/lab$(printf %02d "$lab")
    args=$(sed -n 's/#.*//; s/^test-args[[:space:]]*//p' "grader/rubrics/$name.rubric")
    s=$(now)
    case $mode in
        eager) $MPIRUN -np "$NP" "$drv" $args -q >"$out" 2>&1 ;;
        deferred) PL_STREAMS=deferred $MPIRUN -np "$NP" "$drv" $args -q >"$out" 2>&1 ;;
        checked) PL_CHECKED=1 $MPIRUN -np "$NP" "$drv" $args -q >"$out" 2>&1 ;;
        deferred+checked) PL_STREAMS=deferred PL_CHECKED=1 $MPIRUN -np "$NP" "$drv" $args -q >"$out" 2>&1 ;;
        asan) PL_STREAMS=deferred PL_CHECKED=1 \
                  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_odr_violation=0:disable_coredump=0" \
                  $MPIRUN -np "$NP" "build/asan/cpu/solutions/lab$(printf %02d "$lab")" $args -q >"$out" 2>&1 ;;
        graded) rm -rf "$out.grade"
                "$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 RUBRIC_SCALE=1 NP="$NP" OUT="$out.grade" >"$out" 2>&1 ;;
    esac
    rc=$?
    local e
    e=$(now)
    if [ "$mode" = graded ]; then # every case passed (at one world size, some items have none)
        rc=0
        grep -q '"classification":' "$out.grade/$name/cases.json" 2>/dev/null || rc=1
        grep '"classification":' "$out.grade/$name/cases.json" 2>/dev/null | grep -qv '"pass"' && rc=1
    fi
    if [ $rc -ne 0 ]; then echo fail; return; fi
    echo "$e - $s" | bc
}

med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR && v[NR] != "fail") ? v[int((NR+1)/2)] : "fail"}'; }

echo "# cost of the grader's checks: each lab's solution driver at np $NP with the rubric's test arguments"
echo "# ($REPS rounds, modes in turn, median wall time; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
for lab in $LABS; do
    name=$(lab_name "$lab")
    [ -n "$name" ] || { echo "# no lab $lab"; continue; }
    # build both flavours first: the times are runs, not compiling
    "$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 RUBRIC_SCALE=1 NP=1 T=none >/dev/null 2>&1
    "$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 RUBRIC_SCALE=1 NP=1 T=none SANITIZE=address \
        OUT=build/asan/grade >/dev/null 2>&1
    declare -A t=()
    for _ in $(seq "$REPS"); do
        for m in $MODES; do t[$m]="${t[$m]:-} $(run "$lab" "$m")"; done
    done
    base=$(echo "${t[eager]}" | med)
    if [ "$base" = fail ]; then
        echo "lab $lab: the solution driver failed in eager mode (runs:${t[eager]}): $(tail -n 2 "$out" | tr '\n' ' ')"
        unset t
        continue
    fi
    for m in $MODES; do
        [ "$m" = eager ] && continue
        v=$(echo "${t[$m]}" | med)
        if [ "$v" = fail ]; then echo "lab $lab $m: a run failed (runs:${t[$m]})"; continue; fi
        printf "ratio checks lab %s np %s: %s / eager wall time %6.2f   (%.2f s vs %.2f s)\n" \
            "$lab" "$NP" "$m" "$(echo "$v / $base" | bc -l)" "$v" "$base"
    done
    unset t
done
