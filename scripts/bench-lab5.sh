#!/usr/bin/env bash
# bench-lab5.sh OUTDIR - after `make bench LAB=5` (the driver's --run bench): llama.cpp's own
# tokens/s on the same file and prompt token ids as the kit's one-rank bench (OUTDIR/np1.txt),
# one thread, through llama-cpp-python (scripts/bench-lab5-llamacpp.py), then the ratios:
#   ratio lab5 decode / prefill: quantised / float32-dequantised weights, quantised / llama.cpp
# each from wall-clock rates and from CPU-time rates (the process's own CPU seconds: on a
# machine shared with other jobs, the work a step took; the wall clock also counts the time
# the others had the core). Without llama_cpp (pip install llama-cpp-python, or PYTHON=...)
# it prints the kit's own ratios and says that llama.cpp was not measured.
set -u
out=${1:?usage: bench-lab5.sh OUTDIR}
: "${PYTHON:=python3}"
f=$out/np1.txt
[ -f "$f" ] || { echo "# bench-lab5: no one-rank run in $out (NP must include 1)"; exit 0; }
# kit WEIGHTS wall|cpu prefill|decode -> tokens/s
kit() { awk -v w="$1" -v c="$2" -v k="$3" '$1=="bench05" && $2=="weights" && $3==w {
          cpu = 0; for (i = 4; i <= NF; i++) { if ($i == "cpu-time:") cpu = 1
            else if ($i == k && (c == "cpu") == cpu) { print (cpu ? $(i+1) : $(i+3)); exit } } }' "$f"; }
ratio() { echo "$1 / $2" | bc -l; }
q_dec=$(kit quant wall decode) f_dec=$(kit f32 wall decode)
if [ -z "$q_dec" ] || [ -z "$f_dec" ]; then echo "# bench-lab5: the kit's bench lines are missing from $f"; exit 1; fi
model=$(awk '$1=="bench05" && $2=="model" {print $3}' "$f")
gen=$(awk '$1=="bench05" && $2=="gen" {print $3}' "$f")
ids=$(awk '$1=="bench05" && $2=="prompt_ids" {$1=$2=""; print}' "$f")
echo "# Lab 5, one rank, one thread, a prompt of $(echo $ids | wc -w) tokens (the fastest of 5) then $gen greedy tokens (the median): tokens/s"
for c in wall cpu; do
    for k in decode prefill; do
        printf 'ratio lab5 %-7s %-4s quantised / float32 weights  %6.2f   (%s vs %s tok/s)\n' $k $c \
            "$(ratio "$(kit quant $c $k)" "$(kit f32 $c $k)")" "$(kit quant $c $k)" "$(kit f32 $c $k)"
    done
done
if [ "$model" = - ]; then
    echo "# llama.cpp not measured: the tiny llama's file lives for one run only (scripts/fetch-model.sh fetches SmolLM2)"
    exit 0
fi
if ! "$PYTHON" -c "import llama_cpp, numpy" >/dev/null 2>&1; then
    echo "# llama.cpp not measured: $PYTHON cannot import llama_cpp and numpy (pip install llama-cpp-python numpy, or PYTHON=...)"
    exit 0
fi
# shellcheck disable=SC2086
lc=$("$PYTHON" "$(dirname "$0")/bench-lab5-llamacpp.py" "$model" "$gen" $ids 2>/dev/null | awk '$1=="llamacpp"')
if [ -z "$lc" ]; then echo "# llama.cpp's bench failed on $model"; exit 1; fi
# llamacpp prefill P decode D cpu-time: prefill P decode D
lcv() { echo "$lc" | awk -v c="$1" -v k="$2" '{ base = (c == "cpu") ? 6 : 1; for (i = base + 1; i <= NF; i++) if ($i == k) { print $(i+1); exit } }'; }
echo "# llama.cpp (llama-cpp-python $("$PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)')) on $model, n_threads 1: $lc"
for c in wall cpu; do
    for k in decode prefill; do
        target=$([ $k = decode ] && echo 0.8 || echo 1.0)
        printf 'ratio lab5 %-7s %-4s kit quantised / llama.cpp    %6.2f   (%s vs %s tok/s, target >= %s)\n' $k $c \
            "$(ratio "$(kit quant $c $k)" "$(lcv $c $k)")" "$(kit quant $c $k)" "$(lcv $c $k)" $target
    done
done
printf 'ratio lab5 decode  cpu  kit float32 / llama.cpp      %6.2f   (the kit before its weights stayed quantised)\n' \
    "$(ratio "$(kit f32 cpu decode)" "$(lcv cpu decode)")"
