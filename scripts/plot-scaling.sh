#!/usr/bin/env bash
# plot-scaling.sh DIR - after `make scaling LAB=2` (make lab-2 RUN=scaling): the `scaling` and
# `predict` lines of DIR/np*.txt as strong and weak scaling tables, measured (this machine)
# vs predicted (the profile), the cost model checked against this machine where it applies,
# and a gnuplot PNG (DIR/scaling.png).
#   strong: the same MLP step at every world size n        E = t(1) / (n t(n))
#   weak:   ffn = ffn/4 x n (each rank keeps the same work)   E = t(1) / t(n)
set -u
dir=${1:?usage: plot-scaling.sh DIR}
cat "$dir"/np*.txt 2>/dev/null | grep '^scaling ' >"$dir/lines.txt"
[ -s "$dir/lines.txt" ] || { echo "plot-scaling: no 'scaling' lines in $dir/np*.txt" >&2; exit 1; }
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
for kind in strong weak; do
    grep "kind=$kind " "$dir/lines.txt" | while read -r l; do
        echo "$(echo "$l" | field np) $(echo "$l" | field time_us) $(echo "$l" | field flops_per_rank) $(echo "$l" | field comm_frac) $(echo "$l" | field pred_us) $(echo "$l" | field pred_comm_frac) $(echo "$l" | field pred_this_us)"
    done | sort -n >"$dir/$kind.dat"
done
l=$(head -n 1 "$dir/lines.txt")
profile=$(echo "$l" | field profile) device=$(echo "$l" | field device)
shape="T=$(echo "$l" | field T) d=$(echo "$l" | field d)"
{
for kind in strong weak; do
    echo
    echo "## $kind scaling ($shape; ffn $([ $kind = strong ] && echo fixed || echo 'x ranks'))"
    printf "%5s %12s %12s %10s %8s   %12s %10s %8s\n" ranks "time(us)" "GFLOP/s/rk" "comm" "eff" "pred(us)" "pred comm" "pred eff"
    printf "%5s %12s %12s %10s %8s   %12s %10s %8s\n" "" "measured" "" "" "" "$profile" "" ""
    awk -v kind="$kind" 'NR == 1 { t1 = $2; p1 = $5 }
        { n = $1; eff = kind == "strong" ? t1 / (n * $2) : t1 / $2; peff = kind == "strong" ? p1 / (n * $5) : p1 / $5
          printf "%5d %12.1f %12.2f %9.1f%% %8.2f   %12.2f %9.1f%% %8.2f\n", n, $2, $3 / ($2 * 1e-6) / 1e9, 100 * $4, eff, $5, 100 * $6, peff
          print n, eff, peff > FILENAME ".eff" }' "$dir/$kind.dat"
done
if [ "$device" = cpu ]; then
    echo
    echo "## cost model vs this machine (profile this-machine, calibrated by make calibrate)"
    awk '($1 == 1 || $1 == 2) && $7 > 0 { printf "np %d: measured %.1f us, predicted %.1f us, error %+.1f%%\n", $1, $2, $7, 100 * ($7 - $2) / $2 }' "$dir/strong.dat"
else
    echo
    echo "## cost model vs this machine: skipped, the runs used the $device device and the this-machine"
    echo "## profile describes the cpu backend (make calibrate)"
fi
if grep -q '^predict ' "$dir"/np*.txt; then
    echo
    echo "## predicted by $profile for the ideal step"
    grep -h '^predict ' "$dir"/np*.txt | sed 's/^predict //'
fi
cores=$(nproc) gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU) big=$(tail -n 1 "$dir/strong.dat" | awk '{print $1}')
if [ "${gpus:-0}" -lt "${big:-1}" ]; then
    echo
    echo "note: this machine has $cores core(s) and ${gpus:-0} GPU(s) for up to $big ranks: the measured times are"
    echo "oversubscribed (ranks share cores/devices), so measured efficiency says little about tensor parallelism."
    echo "The predicted columns are what a real $profile cluster would show for this recorded step."
fi
} | tee "$dir/scaling.txt"

if command -v gnuplot >/dev/null; then
    gnuplot <<GP 2>"$dir/gnuplot.log" && echo "plot: $dir/scaling.png" | tee -a "$dir/scaling.txt"
set terminal png size 1100,450
set output "$dir/scaling.png"
set multiplot layout 1,2 title "Lab 2 tensor-parallel MLP: efficiency, measured (this machine) vs predicted ($profile)"
set xlabel "ranks"; set ylabel "parallel efficiency"; set yrange [0:1.2]; set logscale x 2; set grid; set key bottom left
set title "strong scaling ($shape)"
plot "$dir/strong.dat.eff" u 1:2 w lp t "measured", "" u 1:3 w lp t "predicted ($profile)", 1 w l dt 2 t "ideal"
set title "weak scaling (ffn x ranks)"
plot "$dir/weak.dat.eff" u 1:2 w lp t "measured", "" u 1:3 w lp t "predicted ($profile)", 1 w l dt 2 t "ideal"
unset multiplot
GP
else
    echo "gnuplot not found: no plot (apt-get install gnuplot-nox)"
fi
