#!/usr/bin/env bash
# plot-train-7.sh DIR - after `make lab-7 RUN=train`: the `train step` lines of DIR/np*.txt
# (one file per world size) as loss curves, DDP's and each ZeRO stage's (DIR/train.png), and
# the worst relative difference between a stage's curve and DDP's checked against 1e-4
# (exit 1 above it: labs/07-zero/README.md says why not 1e-5 over hundreds of steps).
set -u
dir=${1:?usage: plot-train-7.sh DIR}
rc=0 plots="" dt=2
for f in "$dir"/np*.txt; do
    [ -f "$f" ] || continue
    np=$(basename "$f" .txt)
    np=${np#np}
    for s in ddp zero1 zero2 zero3; do
        awk -v s=$s '$1 == "train" && $2 == "step" && $6 == s {print $3, $8, $12}' "$f" >"$dir/np$np-$s.dat"
    done
    [ -s "$dir/np$np-ddp.dat" ] || { echo "plot-train-7: no steps at np $np"; rc=1; continue; }
    worst=$(cat "$dir"/np$np-zero*.dat | awk '{if ($3 + 0 > w) w = $3 + 0} END {print w + 0}')
    read -r first last < <(awk 'NR == 1 {f = $2} {l = $2} END {print f, l}' "$dir/np$np-ddp.dat")
    if awk -v w="$worst" 'BEGIN{exit !(w <= 1e-4)}'; then
        echo "train: np $np loss $first -> $last; ZeRO-1, 2 and 3 follow DDP's curve (worst relative difference $worst)"
    else
        echo "train: np $np: a stage's curve differs from DDP's by $worst (relative), more than 1e-4"
        rc=1
    fi
    plots+="'$dir/np$np-ddp.dat' u 1:2 w l lw 3 t 'DDP, $np ranks', "
    for s in zero1 zero2 zero3; do plots+="'$dir/np$np-$s.dat' u 1:2 w l dt $dt t '$s, $np ranks', "; dt=$((dt % 5 + 1)); done
done
if [ -n "$plots" ] && command -v gnuplot >/dev/null 2>&1; then
    gnuplot <<GP 2>"$dir/gnuplot.log" && echo "train: plot in $dir/train.png"
set terminal pngcairo size 900,480 noenhanced
set output '$dir/train.png'
set title 'Lab 7: a tiny GPT learning a text byte by byte, DDP and ZeRO-1/2/3 (the curves coincide)'
set xlabel 'step'; set ylabel 'training loss (nats per byte)'; set grid
plot ${plots%, }
GP
elif [ -n "$plots" ]; then
    echo "train: gnuplot not found: no plot (the numbers are in $dir/np*.dat)"
fi
exit $rc
