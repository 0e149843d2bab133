#!/usr/bin/env bash
# plot-train.sh DIR - after `make lab-6 RUN=train`: the `epoch` lines of DIR/np*.txt (one
# file per world size) as loss and test-accuracy curves (DIR/train.png), and the final
# accuracy of each world size checked against 0.85 (exit 1 below it).
set -u
dir=${1:?usage: plot-train.sh DIR}
rc=0 plots_loss="" plots_acc=""
for f in "$dir"/np*.txt; do
    [ -f "$f" ] || continue
    np=$(basename "$f" .txt)
    np=${np#np}
    awk '$1 == "epoch" {print $2, $6, $8, $10, $12}' "$f" >"$dir/np$np.dat"
    [ -s "$dir/np$np.dat" ] || { echo "plot-train: no epochs at np $np"; rc=1; continue; }
    acc=$(tail -n 1 "$dir/np$np.dat" | awk '{print $3}')
    if awk -v a="$acc" 'BEGIN{exit !(a >= 0.85)}'; then
        echo "train: np $np final test accuracy $acc (>= 0.85: ok)"
    else
        echo "train: np $np final test accuracy $acc is below 0.85"
        rc=1
    fi
    plots_loss+="'$dir/np$np.dat' using 1:2 with linespoints title 'loss, $np ranks', "
    plots_acc+="'$dir/np$np.dat' using 1:(100*\$3) with linespoints title 'test accuracy, $np ranks', "
done
if [ -n "$plots_loss" ] && command -v gnuplot >/dev/null 2>&1; then
    gnuplot <<GP && echo "train: plot in $dir/train.png"
set terminal pngcairo size 1000,420 noenhanced
set output '$dir/train.png'
set multiplot layout 1,2 title 'Lab 6: MLP on Fashion-MNIST, overlapped DDP'
set xlabel 'epoch'; set ylabel 'training loss'; set grid
plot ${plots_loss%, }
set ylabel 'test accuracy (%)'
plot ${plots_acc%, }
unset multiplot
GP
elif [ -n "$plots_loss" ]; then
    echo "train: gnuplot not found: no plot (the numbers are in $dir/np*.dat)"
fi
exit $rc
