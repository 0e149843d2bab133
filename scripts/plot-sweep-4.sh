#!/usr/bin/env bash
# plot-sweep-4.sh DIR - after `make lab-4 RUN=sweep`: the `sweep` lines of DIR/np*.txt as a
# table and a gnuplot PNG (DIR/sweep.png): per schedule, the bubble as m grows (theory,
# logical clock, cost-model prediction, measured idle share) and the peak stash of the
# busiest stage (measured, the schedule's bound). Also checks the logical clock against
# the closed form for every line (exit 1 on a mismatch).
set -u
dir=${1:?usage: plot-sweep-4.sh DIR}
cat "$dir"/np*.txt 2>/dev/null | grep '^sweep ' >"$dir/lines.txt"
[ -s "$dir/lines.txt" ] || { echo "plot-sweep-4: no 'sweep' lines in $dir/np*.txt" >&2; exit 1; }
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
rc=0 scheds=""
for s in gpipe 1f1b interleaved zbh1; do
    grep -q "sched=$s " "$dir/lines.txt" || continue
    scheds="$scheds $s"
    grep "sched=$s " "$dir/lines.txt" | while read -r l; do
        echo "$(echo "$l" | field m) $(echo "$l" | field bubble_theory) $(echo "$l" | field bubble_clock)" \
             "$(echo "$l" | field pred_bubble) $(echo "$l" | field idle_measured)" \
             "$(echo "$l" | field stash_bytes) $(echo "$l" | field stash_bound) $(echo "$l" | field p)"
    done | sort -n >"$dir/$s.dat"
done
{
    echo "## bubble (share of the step a stage idles) and peak stash of the busiest stage, as m grows"
    printf "%-12s %4s %8s %8s %10s %9s %12s %12s\n" schedule m theory clock predicted measured "stash(KiB)" "bound(KiB)"
    for s in $scheds; do
        awk -v s="$s" '{ printf "%-12s %4d %8.3f %8.3f %10.3f %9.3f %12.1f %12.1f\n", s, $1, $2, $3, $4, $5, $6 / 1024, $7 / 1024 }' "$dir/$s.dat"
    done
    echo "(theory: (p-1)/(m+p-1), interleaved (p-1)/(vm+p-1), ZB-H1 ((p-1)+max(0,p-m))/(3m+(p-1)+max(0,p-m)); clock:"
    echo " the logical clock of the executed lists; predicted: the recorded step replayed on the cost model;"
    echo " measured: idle between each rank's first and last action, oversubscribed when ranks outnumber cores)"
} | tee "$dir/sweep.txt"
if awk '{ d = $2 - $3; if (d < 0) d = -d; if (d > 1e-3) bad = 1 } END { exit !bad }' "$dir"/*.dat 2>/dev/null; then
    echo "sweep: the logical clock differs from the closed form on some line" | tee -a "$dir/sweep.txt"
    rc=1
fi
p=$(head -n 1 "$dir/lines.txt" | field p)
if command -v gnuplot >/dev/null 2>&1; then
    bub="" mem="" c=1
    for s in $scheds; do
        bub+="'$dir/$s.dat' u 1:2 w l lc $c dt 2 t '$s theory', '' u 1:4 w lp lc $c pt 7 t '$s predicted', '' u 1:5 w p lc $c pt 4 t '$s measured', "
        mem+="'$dir/$s.dat' u 1:(\$6/1048576) w lp lc $c pt 7 t '$s measured', '' u 1:(\$7/1048576) w l lc $c dt 2 t '$s bound', "
        c=$((c + 1))
    done
    gnuplot <<GP 2>"$dir/gnuplot.log" && echo "plot: $dir/sweep.png" | tee -a "$dir/sweep.txt"
set terminal pngcairo size 1200,480 noenhanced
set output '$dir/sweep.png'
set multiplot layout 1,2 title 'Lab 4: pipeline schedules at p = $p as the micro-batches grow'
set logscale x 2; set grid; set xlabel 'micro-batches m'; set key top right font ',8'
set ylabel 'bubble (idle share of the step)'; set yrange [0:1]
plot ${bub%, }
set ylabel 'peak stash of the busiest stage (MiB)'; set yrange [0:*]; set key top left
plot ${mem%, }
unset multiplot
GP
else
    echo "gnuplot not found: no plot (the numbers are in $dir/*.dat)"
fi
exit $rc
