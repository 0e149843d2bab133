#!/usr/bin/env bash
# bench-lab5.sh OUTDIR - after `make bench LAB=5` (the driver's --run bench): llama.cpp's own
# tokens/s on the same file and prompt token ids as the kit's one-rank bench (OUTDIR/np1.txt),
# one thread, through llama-cpp-python (scripts/bench-lab5-llamacpp.py), then the ratios:
#   ratio lab5 decode:  quantised / float32-dequantised weights, and quantised / llama.cpp
#   ratio lab5 prefill: the same
# Without llama_cpp (pip install llama-cpp-python, or PYTHON=...) it prints the kit's own
# ratio and says that llama.cpp was not measured. Env: PYTHON (default python3).
set -u
out=${1:?usage: bench-lab5.sh OUTDIR}
: "${PYTHON:=python3}"
f=$out/np1.txt
[ -f "$f" ] || { echo "# bench-lab5: no one-rank run in $out (NP must include 1)"; exit 0; }
read_kit() { awk -v w="$1" -v k="$2" '$1=="bench05" && $2=="weights" && $3==w { for (i=4;i<=NF;i++) if ($i==k) { print $(i+3); exit } }' "$f"; }
f32_pre=$(read_kit f32 prefill) f32_dec=$(read_kit f32 decode) q_pre=$(read_kit quant prefill) q_dec=$(read_kit quant decode)
if [ -z "$q_dec" ] || [ -z "$f32_dec" ]; then echo "# bench-lab5: the kit's bench lines are missing from $f"; exit 1; fi
model=$(awk '$1=="bench05" && $2=="model" {print $3}' "$f")
gen=$(awk '$1=="bench05" && $2=="gen" {print $3}' "$f")
ids=$(awk '$1=="bench05" && $2=="prompt_ids" {$1=$2=""; print}' "$f")
ntok=$(echo $ids | wc -w)
echo "# Lab 5, one rank, one thread, prompt of $ntok tokens then $gen greedy tokens: tokens/s"
printf 'ratio lab5 decode  quantised / float32 weights  %6.2f   (%s vs %s tok/s)\n' "$(echo "$q_dec / $f32_dec" | bc -l)" "$q_dec" "$f32_dec"
printf 'ratio lab5 prefill quantised / float32 weights  %6.2f   (%s vs %s tok/s)\n' "$(echo "$q_pre / $f32_pre" | bc -l)" "$q_pre" "$f32_pre"
if ! "$PYTHON" -c "import llama_cpp, numpy" >/dev/null 2>&1; then
    echo "# llama.cpp not measured: $PYTHON cannot import llama_cpp and numpy (pip install llama-cpp-python numpy, or PYTHON=...)"
    exit 0
fi
# shellcheck disable=SC2086
lc=$(OMP_NUM_THREADS=1 "$PYTHON" "$(dirname "$0")/bench-lab5-llamacpp.py" "$model" "$gen" $ids 2>/dev/null | awk '$1=="llamacpp"')
if [ -z "$lc" ]; then echo "# llama.cpp's bench failed on $model"; exit 1; fi
lc_pre=$(echo "$lc" | awk '{print $3}') lc_dec=$(echo "$lc" | awk '{print $5}')
echo "# llama.cpp (llama-cpp-python $("$PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)')) on $model: prefill $lc_pre tok/s, decode $lc_dec tok/s"
printf 'ratio lab5 decode  kit quantised / llama.cpp    %6.2f   (%s vs %s tok/s, target >= 0.8)\n' "$(echo "$q_dec / $lc_dec" | bc -l)" "$q_dec" "$lc_dec"
printf 'ratio lab5 prefill kit quantised / llama.cpp    %6.2f   (%s vs %s tok/s, target >= 1.0)\n' "$(echo "$q_pre / $lc_pre" | bc -l)" "$q_pre" "$lc_pre"
printf 'ratio lab5 decode  kit float32 / llama.cpp      %6.2f   (the kit before its weights stayed quantised)\n' "$(echo "$f32_dec / $lc_dec" | bc -l)"
