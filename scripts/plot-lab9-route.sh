#!/usr/bin/env bash
# plot-lab9-route.sh DIR - after `make lab-9 RUN=route`: the `route` lines of DIR/np*.txt as
# tokens per expert per step, from a uniform and from a skewed router (one panel each), and
# the aux loss of both (DIR/route.png). Checks that the skewed router came back to balance:
# its last step's busiest expert holds less than twice the mean (exit 1 otherwise).
set -u
dir=${1:?usage: plot-lab9-route.sh DIR}
rc=0
for f in "$dir"/np*.txt; do
    [ -f "$f" ] || continue
    np=$(basename "$f" .txt)
    np=${np#np}
    for v in uniform skewed; do
        awk -v v="$v" '$1 == "route" && $2 == v {line = $4 " " $6 " " $8; for (i = 10; i <= NF; i++) line = line " " $i; print line}' \
            "$f" >"$dir/np$np-$v.dat"
    done
    [ -s "$dir/np$np-skewed.dat" ] || { echo "route: no steps at np $np"; rc=1; continue; }
    experts=$(head -n 1 "$dir/np$np-skewed.dat" | awk '{print NF - 3}')
    last=$(tail -n 1 "$dir/np$np-skewed.dat")
    first=$(head -n 1 "$dir/np$np-skewed.dat")
    read -r ok busiest mean <<<"$(echo "$last" | awk '{m = 0; s = 0; for (i = 4; i <= NF; i++) {s += $i; if ($i > m) m = $i}
        mean = s / (NF - 3); print (m < 2 * mean) ? 1 : 0, m, mean}')"
    start=$(echo "$first" | awk '{m = 0; for (i = 4; i <= NF; i++) if ($i > m) m = $i; print m}')
    if [ "$ok" = 1 ]; then
        echo "route: np $np: the skewed router's busiest expert went from $start to $busiest tokens (mean $mean): balanced"
    else
        echo "route: np $np: the skewed router's busiest expert still holds $busiest tokens (mean $mean): not balanced"
        rc=1
    fi
    command -v gnuplot >/dev/null 2>&1 || { echo "route: gnuplot not found: no plot (the numbers are in $dir/np$np-*.dat)"; continue; }
    plots_u="" plots_s=""
    for ((e = 0; e < experts; e++)); do
        plots_u+="'$dir/np$np-uniform.dat' using 1:$((e + 4)) with lines title 'expert $e', "
        plots_s+="'$dir/np$np-skewed.dat' using 1:$((e + 4)) with lines title 'expert $e', "
    done
    gnuplot <<GP && echo "route: plot in $dir/route-np$np.png"
set terminal pngcairo size 1400,420 noenhanced
set output '$dir/route-np$np.png'
set multiplot layout 1,3 title 'Lab 9: tokens per expert per step, $np ranks, top-2 (the aux loss alone trains the router)'
set xlabel 'step'; set grid; set key outside right
set ylabel 'tokens (choices)'
set title 'uniform start'
plot ${plots_u%, }
set title 'skewed start (all to expert 0)'
plot ${plots_s%, }
set title 'aux loss (alpha = 0.01: 0.01 is balance)'
set ylabel 'aux loss'
plot '$dir/np$np-uniform.dat' using 1:2 with linespoints title 'uniform', '$dir/np$np-skewed.dat' using 1:2 with linespoints title 'skewed'
unset multiplot
GP
done
exit $rc
