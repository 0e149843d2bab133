#!/usr/bin/env bash
# tests/bench.sh - `make bench`: measurements taken side by side in one run, printed as
# `ratio` lines with their targets. Nothing here is asserted: these machines are noisy.
set -u
cd "$(dirname "$0")/.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
B=build/cpu
echo "# make bench on $(nproc) core(s); ranks beyond that are oversubscribed"
echo "# the cost model's this-machine profile, fitted here first (make calibrate -> build/profiles/): every"
echo "# 'predicted / measured' line below on this machine uses it"
$MAKE --no-print-directory -s calibrate MPIRUN="$MPIRUN" 2>&1 | grep '^wrote' || echo "# make calibrate failed: the predictions below use the shipped profile"

echo "# harness overhead: pl_allreduce vs raw MPI_Allreduce (2 ranks)"
rawout=$(timeout 300 $MPIRUN -np 2 $B/bench/bench_allreduce 2>&1)
echo "$rawout" | grep '^ratio'

echo "# what the referee/player split costs: Lab 1's library all-reduce (pl_allreduce) as its referee times it"
echo "# (a barrier of the players, then go to done through the control socket, fresh inputs for every call,"
echo "# each checked), against raw MPI_Allreduce timed in one process with the calls back to back on distinct"
echo "# buffers, 2 ranks (docs/grader.md, \"Timing\"). Each timed run makes as many calls as last ~1 ms (at most"
echo "# 64 KiB of buffers: one call from 64 KiB on); --calls 1 shows one call per run. Transports: the player's own MPI (PL_TRANSPORT=mpi),"
echo "# or the referees moving every message (graded cpu runs: each message is a request on the control socket)"
raw=$(echo "$rawout" | awk '/^raw back to back/ {sub(":", "", $5); print $5, $6}')
for t in mpi referee; do
    for calls in 0 1; do
        ref=$(PL_TRANSPORT=$t timeout 300 $MPIRUN -np 2 $B/solutions/lab01 --collective allreduce_ring -b 1K -e 64M -f 1024 -n 9 --calls $calls 2>&1 |
              awk '$1 == "allreduce_ring" && $2 > 0 {print $2, $16}')
        echo "$raw" | join - <(echo "$ref") 2>/dev/null | awk -v t=$t -v calls=$calls 'NF == 3 && $3 > 0 {
            printf "ratio referee timing (%s transport, %s), allreduce %s: raw MPI back to back / library timed by the referee  %6.3f   (%.2f us vs %.2f us%s)\n",
                   t, calls == 1 ? "one call per run" : "batched", ($1 == 1024 ? "1 KiB" : $1 == 1048576 ? "1 MiB" : "64 MiB"), $2 / $3, $2, $3,
                   (t == "mpi" && calls == 0) ? ($1 == 1024 ? ", target >= 0.9" : ", target >= 0.97") : "" }'
    done
done

echo "# Lab 0's point-to-point bandwidth (ping-pong 0<->1, median one-way time) as a graded cpu run measures it"
echo "# (the referees move every message through the arena), with the player's own MPI (PL_TRANSPORT=mpi: no"
echo "# single-copy CMA), against plain MPI in one process pair, with Open MPI's default single-copy mechanism"
echo "# and with it off (docs/grader.md, \"Timing\"): target >= 0.9 for the graded run"
pp=$(timeout 120 $MPIRUN -np 2 $B/bench/bench_pingpong 2>&1 | awk '$1 == "pingpong" {sub(":", "", $2); print $2, $5}')
pp_nocma=$(OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_sm_single_copy_mechanism=none \
           timeout 120 $MPIRUN -np 2 $B/bench/bench_pingpong 2>&1 | awk '$1 == "pingpong" {sub(":", "", $2); print $2, $5}')
for t in referee mpi; do
    lab0=$(PL_TRANSPORT=$t timeout 300 $MPIRUN -np 2 $B/labs/lab00 -b 64K -e 16M -f 256 2>&1 |
           awk '$1 == "0->1" && $2 ~ /^[0-9]+$/ {print $2, $5}')
    echo "$pp" | join - <(echo "$pp_nocma") | join - <(echo "$lab0") 2>/dev/null | awk -v t=$t 'NF == 4 && $4 > 0 {
        printf "ratio Lab 0 bandwidth %s (%s): %s / plain MPI  %6.3f   (%.2f GB/s; plain MPI %.2f GB/s, single copy off %.2f GB/s%s)\n",
               ($1 == 65536 ? "64 KiB" : "16 MiB"), t == "referee" ? "graded: the referees move the messages" : "the player'"'"'s own MPI",
               t == "referee" ? "graded" : "own MPI", $4 / $2, $4, $2, $3, t == "referee" ? ", target >= 0.9" : "" }'
done

echo "# Lab 9's one-shot all-reduce at 1 KiB (allreduce.oneshot.timed.c256, the player's own MPI and symmetric"
echo "# memory), timed by the referee batched and one call per run, beside the library's all-reduce in the same runs"
for calls in 0 1; do
    timeout 300 $MPIRUN -np 2 $B/solutions/lab09 --filter 'allreduce.oneshot.timed.*' --calls $calls 2>&1 |
        awk -v calls=$calls -v raw="$(echo "$raw" | awk '$1 == 1024 {print $2}')" '$1 == "pass" && /per call median/ {
            for (i = 1; i <= NF; i++) { if ($i == "one-shot") mine = $(i + 1); if ($i == "all-reduce") lib = $(i + 1); if ($i == "each") k = $(i + 2) }
            printf "ratio referee timing, Lab 9 one-shot 1 KiB (%s): raw MPI back to back / one-shot timed by the referee  %6.3f   (%.2f us vs %.2f us; the library %.2f us)\n",
                   calls == 1 ? "one call per run" : "batched, " k " calls per run", raw / mine, raw, mine, lib }'
done

echo "# pl_gemm vs raw cblas_sgemm (1 rank, 1 BLAS thread)"
timeout 300 $MPIRUN -np 1 $B/bench/bench_gemm 2>&1 | grep '^ratio'

if [ -x build/cuda/bench/bench_gpu ]; then
    echo "# GPU: pl_allreduce vs ncclAllReduce (1 rank), pl_gemm vs cublasSgemm"
    timeout 300 $MPIRUN -np 1 build/cuda/bench/bench_gpu 2>&1 | grep -E '^(ratio|# bench_gpu)'
fi

echo "# solution ring all-reduce vs library all-reduce, 64 MiB, 4 ranks: three jobs, the median ratio"
echo "# (4 ranks on 2 cores: a job's speed depends on how the ranks land on the cores)"
for i in 1 2 3; do
    # the table line: ... root | out-of-place time algbw busbw #wrong | in-place ... | med lib-med
    timeout 600 $MPIRUN -np 4 $B/solutions/lab01 --collective allreduce_ring -b 64M -e 64M -n 5 2>&1 |
        awk '$1=="allreduce_ring" && $2 > 0 && $15 > 0 { print $16/$15, $15, $16 }'
done | sort -n | awk '{ r[NR] = $1; s[NR] = $2; l[NR] = $3; all = all sprintf(" %.2f", $1) }
    END { if (NR == 3) printf "ratio ring allreduce 64 MiB: library / solution  %6.3f   (median of 3 jobs:%s; solution %.0f us, library %.0f us, target >= 0.8)\n", r[2], all, s[2], l[2] }'

echo "# wall time of make lab-1"
tmp=$(mktemp -d)
tar --exclude=./build --exclude=./.git -cf - . | tar -C "$tmp" -xf -
( cd "$tmp" && s=$(date +%s.%N) && $MAKE --no-print-directory lab-1 NP=4 >/dev/null 2>&1; e=$(date +%s.%N)
  echo "time make lab-1 from clean (NP=4): $(echo "$e - $s" | bc) s"
  touch labs/01-collectives/collectives.c
  s=$(date +%s.%N); $MAKE --no-print-directory lab-1 NP=4 >/dev/null 2>&1; e=$(date +%s.%N)
  echo "time make lab-1 after touching collectives.c (NP=4): $(echo "$e - $s" | bc) s" )
rm -rf "$tmp"

echo "# Lab 6: DDP step time (SGD), naive vs bucketed vs overlapped"
echo "# (overlap_fraction: share of all-reduce time inside backward, from the trace; cpu: MPI non-blocking"
echo "#  collectives progress when the comm stream is drained, so overlap shows in the trace more than in time;"
echo "#  pred_*: each recorded step replayed on the dgx-h100 cost-model profile, pred_overlap = share of the"
echo "#  all-reduce time that the replay runs beside compute)"
lab6() { # NP HIDDEN BATCH ITERS
    out=$(timeout 300 $MPIRUN -np $1 $B/solutions/lab06 --run bench -n $4 --hidden $2 --batch $3 2>&1)
    echo "$out" | grep '^bench06'
    echo "$out" | awk -v np=$1 -v h=$2 '$1=="bench06" {t[$5]=$7; c[$5]=$9; p[$5]=$13; o[$5]=$15; prof=$17}
        END { if (t["overlap"] > 0 && t["bucketed"] > 0 && t["naive"] > 0)
          printf "ratio lab6 hidden %d np %d: naive/bucketed step time %6.3f, bucketed/overlap %6.3f (all-reduces per step %s vs %s vs %s)\n",
                 h, np, t["naive"]/t["bucketed"], t["bucketed"]/t["overlap"], c["naive"], c["bucketed"], c["overlap"]
          if (p["overlap"] > 0 && p["bucketed"] > 0 && p["naive"] > 0)
          printf "ratio lab6 hidden %d np %d predicted (%s): naive/bucketed step time %6.3f, bucketed/overlap %6.3f (%.1f / %.1f / %.1f us; overlapped all-reduce time hidden %.0f%%)\n",
                 h, np, prof, p["naive"]/p["bucketed"], p["bucketed"]/p["overlap"], p["naive"], p["bucketed"], p["overlap"], 100*o["overlap"] }'
}
echo "# MLP 784-256-256-10, global batch 64"
for np in 1 2 4; do lab6 $np 256 64 20; done
echo "# MLP 784-2048-2048-10, global batch 256 (17 MB of gradients)"
for np in 2 4; do lab6 $np 2048 256 5; done

echo "# Lab 2: tensor-parallel GEMM per-rank efficiency and the cost model on this machine"
for np in 1 2; do
    timeout 300 $MPIRUN -np $np $B/solutions/lab02 --run bench 2>&1 | grep '^ratio'
done

echo "# Lab 4: pipeline step per schedule vs one rank doing the same work; bubble: theory, measured idle,"
echo "#  and the recorded step replayed on dgx-h100 (pred_*); ranks beyond the cores are oversubscribed"
$MAKE --no-print-directory lab-4 RUN=bench SOLUTION=1 2>&1 | grep '^bench04'
echo "# Lab 5: one rank, float32 vs quantised weights vs llama.cpp (ratio lines, wall clock and CPU time); then"
echo "#  tokens/s per split mode and batch, prefill and decode: measured here, and predicted for"
echo "#  dgx-h100 and pcie-4gpu (columns: measured, dgx-h100, pcie-4gpu); winner = the fastest mode"
if [ -f "${GGUF:-datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf}" ]; then l5args=; else
    echo "#  (SmolLM2 not fetched: the tiny llama; scripts/fetch-model.sh for the real model)"; l5args="--model tiny"; fi
$MAKE --no-print-directory lab-5 RUN=bench SOLUTION=1 ARGS="$l5args" 2>&1 | grep -E '^(ratio|# llama|sweep|winner)'
echo "# Lab 8: Table 1 of the Megatron-LM paper predicted on dgx-a100 at its published configurations (predicted /"
echo "#  published TFLOP/s per GPU, target 0.9 - 1.1), then the tiny GPT's step measured here beside the planner's"
echo "#  this-machine prediction"
$MAKE --no-print-directory lab-8 RUN=bench SOLUTION=1 2>&1 | grep -E '^(ratio|# Table 1:|#   .* misses)'
echo "# Lab 7: step time of ZeRO-1/2/3 against DDP (vs_ddp): measured here, and the step replayed on"
echo "#  dgx-h100 (pred_vs_ddp); ZeRO-1/2 move DDP's bytes, ZeRO-3 1.5 times them"
$MAKE --no-print-directory lab-7 RUN=bench SOLUTION=1 2>&1 | grep '^bench07'
echo "# what the grader's checks cost: deferred streams per operation (eager / deferred, 2 ranks), then"
echo "#  each lab's solution under deferred streams, red zones, both, AddressSanitizer and a whole graded"
echo "#  make lab-N, against the driver alone (tests/bench/checks_cost.sh; CHECKS_LABS, CHECKS_REPS)"
timeout 300 $MPIRUN -np 2 $B/bench/bench_defer 2>&1 | grep '^ratio'
LABS="${CHECKS_LABS:-1 2 3 4 5 6 7 8 9}" REPS="${CHECKS_REPS:-3}" NP=2 MAKE="$MAKE" MPIRUN="$MPIRUN" \
    tests/bench/checks_cost.sh 2>&1 | grep -E '^(ratio|lab )'
