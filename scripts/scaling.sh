#!/usr/bin/env bash
# scaling.sh BIN - `make scaling LAB=2`: strong and weak scaling of Lab 2's tensor-parallel
# MLP step (forward + backward), measured at the world sizes this machine allows and
# predicted by the cost model (docs/cost-model.md), as a table and a gnuplot PNG.
#   strong: T=128 tokens, d=512, ffn=2048 at every world size n      E = t(1) / (n t(n))
#   weak:   T=128, d=512, ffn=512*n (each rank keeps the same GEMM work)  E = t(1) / t(n)
# Env: MPIRUN, PROFILE (default dgx-h100), NP (default "1 2 4 8"), OUTDIR.
set -u
BIN=$1
: "${MPIRUN:=mpirun}" "${PROFILE:=dgx-h100}" "${OUTDIR:=build/scaling-2}"
NP=${NP:-"1 2 4 8"}
T=128 D=512 F=2048 FW=512
mkdir -p "$OUTDIR"
cores=$(nproc)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
THIS=this-machine
[ -f common/profiles/this-machine.profile ] || THIS=
echo "# make scaling: Lab 2 MLP step, profile $PROFILE, $cores core(s), $gpus GPU(s), world sizes: $NP"

run() { # run NP T,D,F -> the `scaling` line
    timeout 600 $MPIRUN -np "$1" "$BIN" --bench "$2" --profile "$PROFILE" ${THIS:+--this-profile $THIS} -n 5 -w 1 2>"$OUTDIR/err.log" |
        grep '^scaling ' || { echo "error: the run at np $1 failed: $(tail -n 2 "$OUTDIR/err.log" | tr '\n' ' ')" >&2; exit 1; }
}
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

: >"$OUTDIR/strong.dat"; : >"$OUTDIR/weak.dat"
for n in $NP; do
    s=$(run "$n" "$T,$D,$F") || exit 1
    w=$(run "$n" "$T,$D,$((FW * n))") || exit 1
    device=$(field "$s" device)
    echo "$n $(field "$s" time_us) $(field "$s" flops_per_rank) $(field "$s" comm_frac) $(field "$s" pred_us) $(field "$s" pred_comm_frac) $(field "$s" pred_this_us)" >>"$OUTDIR/strong.dat"
    echo "$n $(field "$w" time_us) $(field "$w" flops_per_rank) $(field "$w" comm_frac) $(field "$w" pred_us) $(field "$w" pred_comm_frac) $(field "$w" pred_this_us)" >>"$OUTDIR/weak.dat"
done

table() { # table FILE KIND
    awk -v kind="$2" -v prof="$PROFILE" '
        NR == 1 { t1 = $2; p1 = $5 }
        { n = $1; eff = kind == "strong" ? t1 / (n * $2) : t1 / $2; peff = kind == "strong" ? p1 / (n * $5) : p1 / $5
          printf "%5d %12.1f %12.2f %9.1f%% %8.2f   %12.2f %9.1f%% %8.2f\n", n, $2, $3 / ($2 * 1e-6) / 1e9, 100 * $4, eff, $5, 100 * $6, peff
          print n, eff, peff > FILENAME ".eff" }' "$1"
}
for kind in strong weak; do
    echo
    if [ $kind = strong ]; then echo "## strong scaling: T=$T d=$D ffn=$F"; else echo "## weak scaling: T=$T d=$D ffn=$FW*n"; fi
    printf "%5s %12s %12s %10s %8s   %12s %10s %8s\n" ranks "time(us)" "GFLOP/s/rk" "comm" "eff" "pred(us)" "pred comm" "pred eff"
    printf "%5s %12s %12s %10s %8s   %12s %10s %8s\n" "" "measured" "" "" "" "$PROFILE" "" ""
    table "$OUTDIR/$kind.dat" $kind
done | tee "$OUTDIR/scaling.txt"

# The model against this machine, where it can be checked: 1 and 2 ranks on the cpu (the
# this-machine profile describes the cpu backend: make calibrate measures it).
if [ -n "$THIS" ] && [ "$device" != cpu ]; then
    echo
    echo "## cost model vs this machine: skipped, the runs used the $device device and the this-machine"
    echo "## profile describes the cpu backend (make calibrate)"
elif [ -n "$THIS" ]; then
    echo
    echo "## cost model vs this machine (profile this-machine, calibrated by make calibrate)"
    awk '$1 == 1 || $1 == 2 { printf "np %d: measured %.1f us, predicted %.1f us, error %+.1f%%\n", $1, $2, $7, 100 * ($7 - $2) / $2 }' "$OUTDIR/strong.dat"
fi | tee -a "$OUTDIR/scaling.txt"

# What the profile says about world sizes this machine does not have (the ideal step).
maxn=$(awk '$1 == "gpus_per_node" {g = $2} $1 == "nodes" {n = $2} END {print g * n}' "common/profiles/$PROFILE.profile" 2>/dev/null)
echo
echo "## predicted by $PROFILE for the ideal step (1 .. ${maxn:-8} ranks)" | tee -a "$OUTDIR/scaling.txt"
timeout 120 $MPIRUN -np 1 "$BIN" --profile "$PROFILE" --predict "$T,$D,$F" 2>/dev/null | sed -n 's/^predict //p' | tee -a "$OUTDIR/scaling.txt"

big=$(echo $NP | tr ' ' '\n' | sort -n | tail -n 1)
echo | tee -a "$OUTDIR/scaling.txt"
if [ "$gpus" -lt "$big" ]; then
    echo "note: this machine has $cores core(s) and $gpus GPU(s) for up to $big ranks: the measured times are" | tee -a "$OUTDIR/scaling.txt"
    echo "oversubscribed (ranks share cores/devices), so measured efficiency says little about tensor parallelism." | tee -a "$OUTDIR/scaling.txt"
    echo "The predicted columns are what a real $PROFILE cluster would show for this recorded step." | tee -a "$OUTDIR/scaling.txt"
fi

if command -v gnuplot >/dev/null; then
    gnuplot <<GP 2>"$OUTDIR/gnuplot.log" && echo "plot: $OUTDIR/scaling.png" | tee -a "$OUTDIR/scaling.txt"
set terminal png size 1100,450
set output "$OUTDIR/scaling.png"
set multiplot layout 1,2 title "Lab 2 tensor-parallel MLP: efficiency, measured (this machine) vs predicted ($PROFILE)"
set xlabel "ranks"; set ylabel "parallel efficiency"; set yrange [0:1.2]; set logscale x 2; set grid; set key bottom left
set title "strong scaling (T=$T d=$D ffn=$F)"
plot "$OUTDIR/strong.dat.eff" u 1:2 w lp t "measured", "" u 1:3 w lp t "predicted ($PROFILE)", 1 w l dt 2 t "ideal"
set title "weak scaling (ffn = $FW x ranks)"
plot "$OUTDIR/weak.dat.eff" u 1:2 w lp t "measured", "" u 1:3 w lp t "predicted ($PROFILE)", 1 w l dt 2 t "ideal"
unset multiplot
GP
else
    echo "gnuplot not found: no plot (apt-get install gnuplot-nox)"
fi
