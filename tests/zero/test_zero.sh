#!/usr/bin/env bash
# tests/zero/test_zero.sh - the pieces Lab 7 (sharded data parallelism) adds to the kit: the
# bf16 and clipping kernels (CPU references against independent rules; their CUDA versions
# against the references where a GPU is present), the bf16 collectives and the memory
# categories at 1 to 4 ranks (the collectives on deferred streams too), and the lab's modes:
# measured memory equal to ZeRO's formulas for DDP and every stage, the real-model table,
# bad input refused with one line.
# Prints "ok - ..." / "not ok - ..." lines.
set -u
cd "$(dirname "$0")/../.."
: "${MPIRUN:=mpirun}" "${MAKE:=make}" "${B:=build}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
TMP=$(mktemp -d /tmp/paralab-zero.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

run_tap() { # run_tap NP BIN [ARGS...]: its ok/not ok lines, and a failure if it exits non-zero
    local np=$1; shift
    local out rc
    out=$(timeout 120 $MPIRUN -np "$np" "$@" 2>&1)
    rc=$?
    echo "$out" | grep -E '^(ok|not ok) - '
    [ $rc -eq 0 ] || echo "not ok - $(basename "$1") at np $np exited with $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
}

if ! $MAKE --no-print-directory -s $B/cpu/tests/test_kernels_zero $B/cpu/tests/test_bf16_memtag >"$TMP/build.log" 2>&1; then
    echo "not ok - the Lab 7 kit tests build: $(grep -m1 -i error "$TMP/build.log")"
    exit 1
fi
run_tap 1 $B/cpu/tests/test_kernels_zero
for np in 1 2 3 4; do run_tap $np $B/cpu/tests/test_bf16_memtag; done
# Deferred streams (what graded runs use): a bf16 collective on the default stream must
# complete like one on the comm stream.
for np in 2 3; do
    PL_STREAMS=deferred run_tap $np $B/cpu/tests/test_bf16_memtag | sed -E 's/^(not )?ok - /&deferred streams: /'
done
if [ -x $B/cuda/tests/test_kernels_zero_cuda ] && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    run_tap 1 $B/cuda/tests/test_kernels_zero_cuda --device cuda
else
    echo "# no GPU (or no cuda flavour): the CUDA kernels of Lab 7 are compiled, not run"
fi

# The lab's modes on the reference solution.
bin=$B/cpu/solutions/lab07
if $MAKE --no-print-directory -s driver LAB=07-zero SRC=solutions/07-zero FLAVOR=cpu BIN=$bin >"$TMP/build.log" 2>&1; then
    timeout 120 $MPIRUN -np 4 $bin --run memory >"$TMP/mem.txt" 2>"$TMP/mem.err"
    rc=$?
    lines=$(awk '$1 == "memory"' "$TMP/mem.txt" | wc -l)
    off=$(awk '$1 == "memory" && $15 != $17' "$TMP/mem.txt" | wc -l)
    [ $rc = 0 ] && [ "$lines" = 8 ] && [ "$off" = 0 ] \
        && echo "ok - lab 7 --run memory at np 4: DDP and ZeRO-1/2/3, fp32 and bf16, measured bytes per rank = ZeRO's formulas (8 of 8)" \
        || echo "not ok - lab 7 --run memory at np 4: $off of $lines measurements differ from the formulas (exit $rc)"
    grep -q "realmodel GPT-3-175B .* stage zero3 .* smallest_N_80GB 35$" "$TMP/mem.txt" \
        && grep -q "realmodel Llama-3-70B .* stage zero3 .* smallest_N_80GB 15$" "$TMP/mem.txt" \
        && grep -q "realmodel GPT-3-175B .* stage zero1 .* smallest_N_80GB none$" "$TMP/mem.txt" \
        && echo "ok - lab 7 real models: ZeRO-3 fits GPT-3 175B from 35 GPUs of 80 GB and Llama-3-70B from 15; ZeRO-1 never fits GPT-3" \
        || echo "not ok - lab 7 real-model table"
    timeout 60 $MPIRUN -np 2 $bin --batch 25 >"$TMP/o" 2>"$TMP/e"
    rc=$?
    [ $rc = 2 ] && [ "$(grep -c '^error:' "$TMP/e")" = 1 ] && grep -q "not a multiple of the world size" "$TMP/e" \
        && echo "ok - lab 7: a batch that does not split over the ranks is one 'error:' line and exit 2" \
        || echo "not ok - lab 7: --batch 25 at np 2 (exit $rc)"
    # a checkpoint directory a dead run left (its referee killed on a host where no engine
    # runs to remove it) is removed by the next checkpoint case's rank 0; one whose maker
    # still holds its lock, and one made under a minute ago, are not
    dead=$(mktemp -d /dev/shm/paralab-zero.test-dead.XXXXXX) young=$(mktemp -d /dev/shm/paralab-zero.test-young.XXXXXX)
    held=$(mktemp -d /dev/shm/paralab-zero.test-held.XXXXXX)
    echo x >"$dead/rank-00000.bin"
    touch -d '5 minutes ago' "$dead" "$held"
    exec {lockfd}<"$held"  # this shell holds the lock, as a live run's rank 0 would
    flock -n "$lockfd"
    timeout 120 $MPIRUN -np 2 $bin --filter 'ckpt.*' -q >"$TMP/o" 2>&1
    rc=$?
    [ $rc = 0 ] && [ ! -e "$dead" ] && [ -d "$young" ] && [ -d "$held" ] \
        && echo "ok - lab 7: a checkpoint case removes a dead run's directory from /dev/shm, not a held or a new one" \
        || echo "not ok - lab 7: a checkpoint case removes a dead run's directory (exit $rc; dead $([ -e "$dead" ] && echo kept || echo removed), held $([ -d "$held" ] && echo kept || echo removed), new $([ -d "$young" ] && echo kept || echo removed))"
    exec {lockfd}<&-
    rm -rf "$dead" "$young" "$held"
else
    echo "not ok - lab 7's solution driver builds: $(grep -m1 -i error "$TMP/build.log")"
fi
exit 0
