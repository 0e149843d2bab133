#!/usr/bin/env bash
# plot-memory-7.sh DIR - after `make lab-7 RUN=memory`: the `memory` lines of DIR/np*.txt as
# model-state bytes per rank against the world size N, measured (points) and by ZeRO's
# formula (lines), for DDP and each stage, fp32 and bf16 mixed precision (DIR/memory.png);
# the real-model table (`realmodel` lines) printed once; exit 1 when a measurement exceeds
# its formula by more than the padding allows (1%).
set -u
dir=${1:?usage: plot-memory-7.sh DIR}
cat "$dir"/np*.txt 2>/dev/null | awk '$1 == "memory"' >"$dir/memory.dat"
[ -s "$dir/memory.dat" ] || { echo "plot-memory-7: no memory lines in $dir/np*.txt"; exit 1; }
rc=0
echo "memory: model-state bytes per rank (measured / ZeRO's formula)"
awk '{printf "  np %-2s %-4s %-5s %10s / %10s  %s bytes per parameter\n", $3, $5, $7, $15, $17, $19}' "$dir/memory.dat" | sort -k3,3 -k4,4 -k2n
if awk '{if ($15 > 1.01 * $17) bad = 1} END {exit !bad}' "$dir/memory.dat"; then
    echo "memory: a measurement exceeds its formula by more than 1%"; rc=1
fi
f=$(ls "$dir"/np*.txt | head -n 1)
echo "memory: real models, bf16 mixed precision, model states only, on 80 GB GPUs:"
awk '$1 == "realmodel" {printf "  %-12s %-5s  %9.3g bytes per rank at N = 64, smallest N that fits 80 GB: %s\n", $2, $6, $8, $12}' "$f"
panel() { # panel DTYPE: the plot command of one dtype
    local plots="" c=1
    for s in ddp zero1 zero2 zero3; do
        awk -v d=$1 -v s=$s '$5 == d && $7 == s {print $3, $15, $17}' "$dir/memory.dat" | sort -n >"$dir/mem-$1-$s.dat"
        [ -s "$dir/mem-$1-$s.dat" ] || continue
        plots+="'$dir/mem-$1-$s.dat' u 1:(\$3/1024) w l lc $c lw 2 t '$s (formula)', '' u 1:(\$2/1024) w p lc $c pt 7 ps 1.5 t '$s (measured)', "
        c=$((c + 1))
    done
    echo "plot ${plots%, }"
}
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot <<GP 2>"$dir/gnuplot.log" && echo "memory: plot in $dir/memory.png"
set terminal pngcairo size 1200,520 noenhanced
set output '$dir/memory.png'
set multiplot layout 1,2 title 'Lab 7: model states per rank vs world size N (lines: ZeRO formula, points: measured)'
set xlabel 'ranks N'; set ylabel 'KiB per rank'; set grid; set logscale y; set key bottom left
set title 'fp32 AdamW: 4 + 4 + 8 bytes per parameter'
$(panel fp32)
set title 'bf16 mixed precision: 2 + 2 + 12 bytes per parameter'
$(panel bf16)
unset multiplot
GP
else
    echo "memory: gnuplot not found: no plot (the numbers are in $dir/memory.dat)"
fi
exit $rc
