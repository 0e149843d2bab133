#!/usr/bin/env bash
# asan-lab.sh N [NP] - grade lab N's reference solution in the AddressSanitizer flavour of the
# cpu build (make SANITIZE=address: build/asan/), at the world sizes NP (default "2") with
# the rubric's small arguments. Exit 0 only when every case that ran passed: a sanitizer
# finding aborts the rank, so the case is a crash (at a few world sizes an item whose cases
# run at others scores 0: the verdict is the cases', not the score's).
#
#   scripts/asan-lab.sh 4            # make asan LAB=4 does the same
#   scripts/asan-lab.sh 1 "1 3"
#
# Sanitizer options that work beside Open MPI and the player's confinement (docs/harness.md,
# "AddressSanitizer"):
#   detect_leaks=0      Open MPI keeps memory to the end and unloads its plugins before the
#                       leak check, and LeakSanitizer stops the process's threads with ptrace,
#                       which the player may not call: leaks are the harness's own check
#   abort_on_error=1    a finding kills the rank with SIGABRT: the case is a crash
#   disable_coredump=0  the sanitizer would otherwise lower the core-file limit at start-up,
#                       and the player may change no limit (grader/runner/confine.c)
# The player may open no file once it plays, so the report itself goes to the rank's stderr:
# run the failing case's driver by hand (the command is printed) to read it.
set -u
cd "$(dirname "$0")/.."
lab=${1:?usage: scripts/asan-lab.sh N [NP]}
np=${2:-2}
: "${MAKE:=make}"
out=build/asan/grade
name=$(ls grader/rubrics/ | grep "^$(printf %02d "$lab" 2>/dev/null)-" | head -n 1 | sed 's/\.rubric$//')
[ -n "$name" ] || { echo "error: asan-lab: no lab $lab" >&2; exit 2; }
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_odr_violation=0:disable_coredump=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
start=$SECONDS
rm -rf "${out:?}/$name"
"$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 SANITIZE=address RUBRIC_SCALE=1 NP="$np" OUT="$out"
rc=$?
cases=$out/$name/cases.json
ran=$(grep -c '"classification":' "$cases" 2>/dev/null)
bad=$(grep '"classification":' "$cases" 2>/dev/null | grep -vc '"pass"')
echo "asan-lab: lab $lab, np $np: ${ran:-0} cases, ${bad:-?} not passed (make exit $rc), $((SECONDS - start)) s"
if [ "${bad:-1}" != 0 ]; then
    args=$(sed -n 's/#.*//; s/^test-args[[:space:]]*//p' "grader/rubrics/$name.rubric")
    echo "asan-lab: to read a sanitizer report: ASAN_OPTIONS=$ASAN_OPTIONS mpirun -np N build/asan/cpu/solutions/lab$(printf %02d "$lab") $args --filter 'CASE'"
fi
[ "${ran:-0}" -gt 0 ] && [ "$bad" = 0 ]
