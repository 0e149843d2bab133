#!/usr/bin/env bash
# plot-train-4.sh DIR - after `make lab-4 RUN=train`: the `train step` lines of DIR/np*.txt
# (one file per world size) as loss curves, the pipeline's beside the single-rank run's on
# the same micro-batches (DIR/train.png), and the worst relative difference between the
# two curves of each world size checked against 1e-5 (exit 1 above it).
set -u
dir=${1:?usage: plot-train-4.sh DIR}
rc=0 plots=""
for f in "$dir"/np*.txt; do
    [ -f "$f" ] || continue
    np=$(basename "$f" .txt)
    np=${np#np}
    awk '$1 == "train" && $2 == "step" {print $3, $7, $9, $11}' "$f" >"$dir/np$np.dat"
    [ -s "$dir/np$np.dat" ] || { echo "plot-train-4: no steps at np $np"; rc=1; continue; }
    read -r worst first last < <(awk 'NR == 1 {f = $2} {if ($4 + 0 > w) w = $4 + 0; l = $2} END {print w + 0, f, l}' "$dir/np$np.dat")
    if awk -v w="$worst" 'BEGIN{exit !(w <= 1e-5)}'; then
        echo "train: np $np loss $first -> $last; the pipeline's and the single rank's curves agree (worst relative difference $worst)"
    else
        echo "train: np $np: the curves differ by $worst (relative), more than 1e-5"
        rc=1
    fi
    plots+="'$dir/np$np.dat' u 1:2 w l lw 2 t 'pipeline, $np ranks', '' u 1:3 w l dt 2 t 'single rank (np $np run)', "
done
if [ -n "$plots" ] && command -v gnuplot >/dev/null 2>&1; then
    gnuplot <<GP 2>"$dir/gnuplot.log" && echo "train: plot in $dir/train.png"
set terminal pngcairo size 900,480 noenhanced
set output '$dir/train.png'
set title 'Lab 4: a tiny GPT learning a text byte by byte, pipeline vs one rank'
set xlabel 'step'; set ylabel 'training loss (nats per byte)'; set grid
plot ${plots%, }
GP
elif [ -n "$plots" ]; then
    echo "train: gnuplot not found: no plot (the numbers are in $dir/np*.dat)"
fi
exit $rc
