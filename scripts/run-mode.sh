#!/usr/bin/env bash
# run-mode.sh LAB DRIVER MODE - `make lab-N RUN=MODE` (and make bench LAB=N, make scaling
# LAB=N): run one of a lab driver's modes at each world size, keep each run's output in
# build/run/LAB-MODE/npN.txt, then the mode's post-processing script (a table, a plot).
# The driver says which modes it has, their default world sizes and their script:
# `DRIVER --modes` prints "name<TAB>np<TAB>script<TAB>help" lines.
# Env: MPIRUN, PL_NP (make's NP=), PL_ARGS (ARGS=), PL_T (T=: --filter, for the mode
# `cases`), and PROFILE, EPOCHS, PROMPT, GGUF, STEPS passed on as --profile, --epochs,
# --prompt, --gguf, --steps to drivers that take them.
set -u
lab=${1:?usage: run-mode.sh LAB DRIVER MODE} drv=${2:?} mode=${3:?}
: "${MPIRUN:=mpirun}" "${B:=build}"
modes=$($MPIRUN -np 1 "$drv" --modes 2>/dev/null) || { echo "error: $drv --modes failed" >&2; exit 2; }
line=$(printf '%s\n' "$modes" | awk -F'\t' -v m="$mode" '$1 == m')
if [ -z "$line" ]; then
    echo "error: lab $lab has no mode '$mode'; its modes: $(printf '%s\n' "$modes" | cut -f1 | tr '\n' ' ')" >&2
    exit 2
fi
np_default=$(printf '%s' "$line" | cut -f2) post=$(printf '%s' "$line" | cut -f3)
nps=${PL_NP:-$np_default}
help=$($MPIRUN -np 1 "$drv" --help 2>/dev/null)
args=()
for pair in PROFILE:--profile EPOCHS:--epochs PROMPT:--prompt GGUF:--gguf STEPS:--steps; do
    var=${pair%%:*} flag=${pair#*:}
    [ -n "${!var:-}" ] || continue
    if printf '%s\n' "$help" | grep -q -- "^  $flag "; then args+=("$flag" "${!var}"); fi
done
# shellcheck disable=SC2206
extra=(${PL_ARGS:-})
[ "$mode" = cases ] && [ -n "${PL_T:-}" ] && extra+=(--filter "$PL_T")
out=$B/run/$lab-$mode
mkdir -p "$out"
rc=0
for np in $nps; do
    case $np in '' | *[!0-9]*) echo "error: NP: '$np' is not a world size" >&2; exit 2 ;; esac
    echo "# $lab $mode at $np rank(s): $MPIRUN -np $np $drv --run $mode ${args[*]} ${extra[*]}"
    $MPIRUN -np "$np" "$drv" --run "$mode" "${args[@]}" "${extra[@]}" | tee "$out/np$np.txt"
    r=${PIPESTATUS[0]}
    [ "$r" -eq 0 ] || { echo "$lab $mode: np $np exited with $r" >&2; rc=$r; }
done
if [ "$post" != - ] && [ -n "$post" ]; then
    NP="$nps" OUTDIR="$out" "$post" "$out" || rc=$?
fi
exit $rc
