#!/usr/bin/env bash
# tests/harness/watchdog_under_load.sh - the watchdog beside a CPU hog: Lab 4's reference
# solution graded at 8 ranks (its rubric's 4-second watchdog), GRADINGS of them at once (a
# class graded several submissions at a time), while HOGS busy loops (default 7 per core: a
# load average near 15 on 2 cores) take the machine. A watchdog that went by time alone
# reported deadlocks there for ranks that were only slow; one that goes by progress must let
# every case pass. Not part of make test (it takes the machine for a minute or two). Prints
# "ok - ..." or "not ok - ...".
#
#   tests/harness/watchdog_under_load.sh      # HOGS=N GRADINGS=N LAB=4 NP=8 to change
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${HOGS:=$((7 * $(nproc)))}" "${LAB:=4}" "${NP:=8}" "${GRADINGS:=1}"
tmp=$(mktemp -d /tmp/paralab-wd-load.XXXXXX)
"$MAKE" --no-print-directory lab-"$LAB" SOLUTION=1 NP=1 T=none >/dev/null 2>&1 # build first
hogs=()
stop_hogs() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; hogs=(); }
trap 'stop_hogs; rm -rf "$tmp"' EXIT
for _ in $(seq "$HOGS"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
done
sleep 5 # let the load average climb
load=$(cut -d' ' -f1 /proc/loadavg)
start=$SECONDS
pids=()
for g in $(seq "$GRADINGS"); do
    "$MAKE" --no-print-directory lab-"$LAB" SOLUTION=1 NP="$NP" RUBRIC_SCALE=1 OUT="$tmp/grade$g" >"$tmp/out$g" 2>&1 &
    pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
took=$((SECONDS - start))
load2=$(cut -d' ' -f1 /proc/loadavg)
stop_hogs
deadlocks=$(cat "$tmp"/out* | grep -c 'deadlock')
scores=$(grep -h '^score:' "$tmp"/out* | sed 's/score: //' | tr '\n' ',' | sed 's/,$//')
echo "# $GRADINGS grading(s) of lab $LAB at np $NP beside $HOGS busy loops: load $load .. $load2, $took s, scores $scores"
cat "$tmp"/out* | grep -E '^  (deadlock|timeout|crash|wrong)' | head -5
if [ $failed = 0 ] && [ "$deadlocks" = 0 ]; then
    echo "ok - watchdog under load: $GRADINGS grading(s) of lab $LAB's solution at np $NP beside $HOGS busy loops score full marks, no deadlock reported"
else
    echo "not ok - watchdog under load: $GRADINGS grading(s) of lab $LAB at np $NP beside $HOGS busy loops: $failed below full marks, $deadlocks deadlock line(s), scores $scores"
    exit 1
fi
