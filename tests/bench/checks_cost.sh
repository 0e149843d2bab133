#!/usr/bin/env bash
# tests/bench/checks_cost.sh - what the grader's checks cost: the wall time of
# `make lab-N SOLUTION=1 RUBRIC_SCALE=1` plain, with deferred streams (PL_STREAMS=deferred),
# with red zones (PL_CHECKED=1), with both, and in the AddressSanitizer flavour, taken
# side by side (the modes in turn, REPS rounds, the median of each), printed as ratio lines.
#
#   tests/bench/checks_cost.sh                 # labs 1-6 at the world sizes in NP
#   LABS="1 4" NP="1 2 3 4" REPS=3 tests/bench/checks_cost.sh
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${LABS:=1 2 3 4 5 6}" "${NP:=1 2 4}" "${REPS:=3}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
unset PL_STREAMS PL_CHECKED
MODES="plain deferred checked deferred+checked asan"
asan_logs=build/asan/grade/checks-cost-logs
run() { # run LAB MODE: prints seconds, or "fail"
    local lab=$1 mode=$2 env=() extra=()
    case $mode in
        deferred) env=(PL_STREAMS=deferred) ;;
        checked) env=(PL_CHECKED=1) ;;
        deferred+checked) env=(PL_STREAMS=deferred PL_CHECKED=1) ;;
        asan) env=(ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_odr_violation=0:log_path=$PWD/$asan_logs/asan")
              extra=(SANITIZE=address OUT=build/asan/grade) ;;
    esac
    local s e
    s=$(date +%s.%N)
    env "${env[@]}" "$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 RUBRIC_SCALE=1 NP="$NP" "${extra[@]}" \
        >/tmp/checks_cost.$$ 2>&1
    local rc=$?
    e=$(date +%s.%N)
    if [ $rc -ne 0 ] || ! grep -q '^score: \([0-9]*\) / \1$' /tmp/checks_cost.$$; then echo fail; return; fi
    echo "$e - $s" | bc
}
rm -rf "$asan_logs" && mkdir -p "$asan_logs"
echo "# cost of the grader's checks on make lab-N SOLUTION=1 RUBRIC_SCALE=1 NP=\"$NP\" ($REPS rounds, median; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
for lab in $LABS; do
    # build every flavour first: the times are grading, not compiling
    "$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 RUBRIC_SCALE=1 NP=1 T=none >/dev/null 2>&1
    "$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 RUBRIC_SCALE=1 NP=1 T=none SANITIZE=address OUT=build/asan/grade >/dev/null 2>&1
    declare -A t=()
    for r in $(seq "$REPS"); do
        for m in $MODES; do t[$m]="${t[$m]:-} $(run "$lab" "$m")"; done
    done
    med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR && v[1] != "fail") ? v[int((NR+1)/2)] : "fail"}'; }
    plain=$(echo "${t[plain]}" | med)
    for m in $MODES; do
        v=$(echo "${t[$m]}" | med)
        [ "$m" = plain ] && { echo "lab $lab plain: $v s (runs:${t[$m]})"; continue; }
        if [ "$v" = fail ] || [ "$plain" = fail ]; then echo "lab $lab $m: a run did not score full marks (runs:${t[$m]})"; continue; fi
        printf "ratio lab %s %s / plain wall time %6.2f   (%s s vs %s s; runs:%s)\n" "$lab" "$m" "$(echo "$v / $plain" | bc -l)" "$v" "$plain" "${t[$m]}"
    done
    unset t
done
n=$(find "$asan_logs" -name 'asan.*' | wc -l)
echo "# AddressSanitizer reports during these runs: $n"
rm -f /tmp/checks_cost.$$
