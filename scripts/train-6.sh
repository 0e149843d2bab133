#!/usr/bin/env bash
# train-6.sh - `make lab-6 RUN=train` / `make train-6`: train the Lab 6 MLP on Fashion-MNIST
# with the overlapped DDP at each world size in NP, then plot loss and test accuracy per
# epoch with gnuplot (OUTDIR/train.png) and check the final accuracy (>= 0.85).
#   scripts/train-6.sh DRIVER   (env: MPIRUN, NP="2 4", EPOCHS=5, OUTDIR=build/train-6)
set -u
drv=${1:?usage: scripts/train-6.sh DRIVER}
: "${MPIRUN:=mpirun}" "${NP:=2 4}" "${EPOCHS:=5}" "${OUTDIR:=build/train-6}"
mkdir -p "$OUTDIR"
rc=0
for np in $NP; do
    csv="$OUTDIR/np$np.dat"
    echo "# training at $np rank(s), $EPOCHS epoch(s)"
    $MPIRUN -np "$np" "$drv" --train 1 --epochs "$EPOCHS" --csv "$csv" || { rc=$?; echo "train-6: np $np failed (exit $rc)" >&2; continue; }
    acc=$(tail -n 1 "$csv" | awk '{print $4}')
    if awk -v a="$acc" 'BEGIN{exit !(a >= 0.85)}'; then
        echo "train-6: np $np final test accuracy $acc (>= 0.85: ok)"
    else
        echo "train-6: np $np final test accuracy $acc is below 0.85"; rc=1
    fi
done
if command -v gnuplot >/dev/null 2>&1; then
    plots_loss="" plots_acc=""
    for np in $NP; do
        [ -s "$OUTDIR/np$np.dat" ] || continue
        plots_loss+="'$OUTDIR/np$np.dat' using 2:3 with linespoints title 'loss, $np ranks', "
        plots_acc+="'$OUTDIR/np$np.dat' using 2:(100*\$4) with linespoints title 'test accuracy, $np ranks', "
    done
    if [ -n "$plots_loss" ]; then
        gnuplot <<GP && echo "train-6: plot in $OUTDIR/train.png"
set terminal pngcairo size 1000,420 noenhanced
set output '$OUTDIR/train.png'
set multiplot layout 1,2 title 'Lab 6: MLP on Fashion-MNIST, overlapped DDP'
set xlabel 'epoch'; set ylabel 'training loss'; set grid
plot ${plots_loss%, }
set ylabel 'test accuracy (%)'
plot ${plots_acc%, }
unset multiplot
GP
    fi
else
    echo "train-6: gnuplot not found: no plot (the numbers are in $OUTDIR/np*.dat)"
fi
exit $rc
