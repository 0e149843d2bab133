#!/usr/bin/env bash
# plot-lab10-long.sh DIR - after `make lab-10 RUN=long`: the `longmem` lines of DIR/np*.txt
# (peak bytes per rank over a forward and a backward, measured and by the reference
# design's formula, for the ring, Ulysses and the 2-D grid) and the `long` lines (the
# longest sequence whose attention layer fits 80 GB per GPU, by the formulas), as a table
# and a plot (DIR/long.png). Exit 1 when there are no longmem lines.
set -u
dir=${1:?usage: plot-lab10-long.sh DIR}
cat "$dir"/np*.txt 2>/dev/null | awk '$1 == "longmem"' | sed 's/[A-Za-z_]*=//g' >"$dir/longmem.dat"
[ -s "$dir/longmem.dat" ] || { echo "long: no longmem lines in $dir/np*.txt"; exit 1; }
# longmem.dat: longmem np S ring ring_formula ulysses ulysses_formula grid grid_formula
echo "long: peak bytes per rank, measured / the reference design's formula"
awk '{printf "  np %-2s S %-6s ring %10s / %-10s ulysses %10s / %-10s", $2, $3, $4, $5, $6, $7
      if ($8 > 0) printf " 2-D grid %10s / %s", $8, $9
      printf "\n"
      for (i = 4; i <= 8; i += 2) if ($i > 1.01 * $(i + 1) && $(i + 1) > 0) above = 1}
     END {if (above) print "long: a measurement is above the reference design (more than 1%): what else does it keep?"}' "$dir/longmem.dat"
cat "$dir"/np*.txt | awk '$1 == "long"' | sed 's/[A-Za-z_]*=//g' | sort -n -k2 | uniq >"$dir/longest.dat"
if [ -s "$dir/longest.dat" ]; then
    echo "long: the longest sequence whose attention layer fits 80 GB per GPU (tokens):"
    awk '{printf "  %d GPU(s): ring %s, Ulysses %s%s\n", $2, $3, $4, ($5 > 0 ? ", 2-D grid (u = 2) " $5 : "")}' "$dir/longest.dat"
fi
command -v gnuplot >/dev/null 2>&1 || { echo "long: gnuplot not found: no plot (the numbers are in $dir/longmem.dat)"; exit 0; }
np=$(sort -n -k2 "$dir/longmem.dat" | tail -n 1 | awk '{print $2}')
awk -v n="$np" '$2 == n' "$dir/longmem.dat" | sort -n -k3 >"$dir/longmem-np$np.dat"
grid=$(awk '$8 > 0 {g = 1} END {print g + 0}' "$dir/longmem-np$np.dat")
plots="'$dir/longmem-np$np.dat' u 3:(\$5/1048576) w l lc 1 lw 2 t 'ring (formula)', '' u 3:(\$4/1048576) w p lc 1 pt 7 ps 1.5 t 'ring (measured)', "
plots+="'' u 3:(\$7/1048576) w l lc 2 lw 2 t 'Ulysses (formula)', '' u 3:(\$6/1048576) w p lc 2 pt 7 ps 1.5 t 'Ulysses (measured)'"
[ "$grid" = 1 ] && plots+=", '' u 3:(\$9/1048576) w l lc 3 lw 2 t '2-D grid (formula)', '' u 3:(\$8/1048576) w p lc 3 pt 7 ps 1.5 t '2-D grid (measured)'"
longest=""
if [ -s "$dir/longest.dat" ]; then
    longest="set title 'longest sequence in 80 GB per GPU (one layer, H 32, Hkv 8, d 128)'
set xlabel 'GPUs'; set ylabel 'million tokens'; unset logscale; set logscale x 2; set key top left
plot '$dir/longest.dat' u 2:(\$3/1e6) w lp lc 1 pt 7 lw 2 t 'ring', '' u 2:(\$4 > 0 ? \$4/1e6 : 1/0) w lp lc 2 pt 7 lw 2 t 'Ulysses', '' u 2:(\$5 > 0 ? \$5/1e6 : 1/0) w lp lc 3 pt 7 lw 2 t '2-D grid (u = 2)'"
fi
gnuplot <<GP 2>"$dir/gnuplot.log" && echo "long: plot in $dir/long.png"
set terminal pngcairo size 1200,520 noenhanced
set output '$dir/long.png'
set multiplot layout 1,2 title 'Lab 10: attention memory per rank (forward + backward), context parallelism'
set grid
set title 'peak per rank at $np rank(s): measured (points), formula (lines)'
set xlabel 'sequence length S'; set ylabel 'MiB per rank'; set logscale xy; set key top left
plot $plots
$longest
unset multiplot
GP
exit 0
