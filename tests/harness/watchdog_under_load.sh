#!/usr/bin/env bash
# tests/harness/watchdog_under_load.sh - the watchdog beside a CPU hog: Lab 4's reference
# solution graded at 8 ranks (its rubric's 4-second watchdog) while HOGS busy loops (default
# 7 per core: a load average near 15 on 2 cores) take the machine. A watchdog that went by
# time alone reported deadlocks there, inside the grader's own gathers, for ranks that were
# only slow; one that goes by progress must let every case pass. Not part of make test (it
# takes the machine for a minute or two). Prints "ok - ..." or "not ok - ...".
#
#   tests/harness/watchdog_under_load.sh            # HOGS=N LAB=4 NP=8 to change
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${HOGS:=$((7 * $(nproc)))}" "${LAB:=4}" "${NP:=8}"
out=$(mktemp /tmp/paralab-wd-load.XXXXXX)
"$MAKE" --no-print-directory lab-"$LAB" SOLUTION=1 NP=1 T=none >/dev/null 2>&1 # build first
hogs=()
stop_hogs() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; hogs=(); }
trap 'stop_hogs; rm -f "$out"' EXIT
for _ in $(seq "$HOGS"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
done
sleep 5 # let the load average climb
load=$(cut -d' ' -f1 /proc/loadavg)
start=$SECONDS
"$MAKE" --no-print-directory lab-"$LAB" SOLUTION=1 NP="$NP" RUBRIC_SCALE=1 >"$out" 2>&1
rc=$?
took=$((SECONDS - start))
load2=$(cut -d' ' -f1 /proc/loadavg)
stop_hogs
deadlocks=$(grep -c 'deadlock' "$out")
score=$(grep '^score:' "$out")
echo "# lab $LAB at np $NP beside $HOGS busy loops: load $load .. $load2, $took s, $score"
grep -E '^  (deadlock|timeout|crash|wrong)' "$out" | head -5
if [ $rc = 0 ] && [ "$deadlocks" = 0 ]; then
    echo "ok - watchdog under load: lab $LAB's solution at np $NP scores full marks beside $HOGS busy loops, no deadlock reported"
else
    echo "not ok - watchdog under load: lab $LAB at np $NP beside $HOGS busy loops: exit $rc, $deadlocks deadlock line(s), $score"
    exit 1
fi
