#!/usr/bin/env bash
# plot-lab5-sweep.sh DIR - after `make lab-5 RUN=sweep`: the `sweep` lines of DIR/np*.txt
# (one file per world size) as tokens/s against the batch, per split mode, for the prefill
# and for a decode step, measured here and predicted for dgx-h100 and pcie-4gpu
# (DIR/sweep-npN.png), and the `winner` lines: which mode is fastest where.
set -u
dir=${1:?usage: plot-lab5-sweep.sh DIR}
rc=0
for f in "$dir"/np*.txt; do
    [ -f "$f" ] || continue
    np=$(basename "$f" .txt)
    np=${np#np}
    plots=()
    for mode in layer row tensor; do
        # sweep np N mode M batch B prefill meas dgx pcie decode meas dgx pcie
        awk -v m="$mode" '$1 == "sweep" && $5 == m {print $7, $9, $10, $11, $13, $14, $15}' "$f" >"$dir/np$np-$mode.dat"
        [ -s "$dir/np$np-$mode.dat" ] && plots+=("$mode")
    done
    if [ ${#plots[@]} -eq 0 ]; then
        echo "sweep: no sweep lines at np $np"
        rc=1
        continue
    fi
    grep '^winner' "$f"
    plen=$(sed -n 's/.*prompts of \([0-9]*\) tokens.*/\1/p' "$f" | head -n 1)
    command -v gnuplot >/dev/null 2>&1 || continue
    script="set terminal pngcairo size 1500,800 noenhanced
set output '$dir/sweep-np$np.png'
set multiplot layout 2,3 title 'Lab 5: tokens/s vs batch, $np rank(s) (prefill: prompts of ${plen:-?} tokens per sequence)'
set logscale xy 2; set grid; set key top left; set xlabel 'batch (sequences)'; set ylabel 'tokens/s'
set xrange [0.8:80]; set xtics (1, 4, 16, 64); set format y '%.0f'"
    for phase in prefill:2 decode:5; do # the .dat columns: batch, then 3 per phase
        for src in "measured here:0" "dgx-h100, predicted:1" "pcie-4gpu, predicted:2"; do
            col=$((${phase#*:} + ${src##*:}))
            line=""
            for mode in "${plots[@]}"; do
                line+="'$dir/np$np-$mode.dat' using 1:(\$$col > 0 ? \$$col : 1/0) with linespoints title '$mode', "
            done
            script+="
set title '${phase%:*}, ${src%:*}'
plot ${line%, }"
        done
    done
    script+="
unset multiplot"
    if gnuplot <<<"$script"; then echo "sweep: plot in $dir/sweep-np$np.png"; else rc=1; fi
done
command -v gnuplot >/dev/null 2>&1 || echo "sweep: gnuplot not found: no plot (the numbers are in $dir/np*-*.dat)"
exit $rc
