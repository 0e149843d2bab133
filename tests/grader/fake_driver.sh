#!/bin/sh
# fake_driver.sh - a lab driver that speaks the driver protocol (docs/grader.md) and
# misbehaves on purpose, for tests/grader/test_engine.sh. FAKE_MODE picks the misbehaviour
# at case alpha.c1024:
#   pass       every case passes
#   wrong      alpha.c1024 gives a wrong result
#   forbidden  beta.c0 calls a library collective
#   crash      alpha.c1024 crashes (harness marker, then SIGSEGV)
#   crashloop  like crash, but --start-after is ignored (restarts make no progress)
#   loop       alpha.c1024 never finishes
#   deadlock   alpha.c1024 deadlocks (watchdog marker, exit 86)
#   garbage    megabytes of random bytes on stdout and stderr, then every case passes
#   halfbytes  alpha sends twice the optimal bytes (bytes_ratio 0.5)
#   fatal      the harness fails before any case (exit 3)
# FAKE_ARGS_LOG=FILE records the command line. FAKE_NP comes from fake_mpirun.sh.
mode=${FAKE_MODE:-pass}
json= filter= start_after=
[ -n "${FAKE_ARGS_LOG:-}" ] && echo "$*" >> "$FAKE_ARGS_LOG"
while [ $# -gt 0 ]; do
    case "$1" in
    --json) json=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --start-after) start_after=$2; shift 2 ;;
    --bogus) echo "error: unknown option --bogus" >&2; exit 2 ;;
    *) shift ;;
    esac
done
[ -n "$json" ] || { echo "error: --json FILE is required" >&2; exit 2; }
[ "$mode" = crashloop ] && start_after=

if [ "$mode" = fatal ]; then
    echo "[rank 0] fake_driver.sh:1: pl_init() -> cannot open the device" >&2
    exit 3
fi
if [ "$mode" = garbage ]; then
    head -c 3000000 /dev/urandom
    head -c 3000000 /dev/urandom >&2
fi

emit() { printf '%s\n' "$1" >> "$json"; }
skipping=${start_after:+yes}

for name in alpha.c0 alpha.c1024 alpha.c1M beta.c0 beta.c1M; do
    if [ -n "$skipping" ]; then
        [ "$name" = "$start_after" ] && skipping=
        continue
    fi
    if [ -n "$filter" ]; then
        case "$name" in $filter) ;; *) continue ;; esac
    fi
    emit "{\"event\":\"begin\",\"case\":\"$name\"}"
    group=${name%%.*}
    bytes=0
    case "$name" in *c1024) bytes=4096 ;; *c1M) bytes=4194304 ;; esac
    verdict=pass message="ok" extra=""
    if [ "$name" = alpha.c1024 ]; then
        case "$mode" in
        wrong) verdict=wrong message=""
               extra=",\"wrong\":12,\"count\":1024,\"first_wrong\":17,\"expected\":3,\"got\":5" ;;
        crash|crashloop) echo "[rank 0] crashed with signal 11 (Segmentation fault)" >&2; kill -SEGV $$ ;;
        loop) sleep 1000 ;;
        deadlock) echo "[rank 1] rank 1 waits in recv for peer 0 (5.0 s)" >&2
                  echo "[rank 0] rank 0 waits in recv for peer 1 (5.0 s)" >&2
                  exit 86 ;;
        esac
    fi
    if [ "$name" = beta.c0 ] && [ "$mode" = forbidden ]; then
        verdict=forbidden message="called pl_allreduce (a library collective)"
    fi
    if [ "$group" = alpha ]; then
        ratio=1.0; [ "$mode" = halfbytes ] && ratio=0.5
        extra="$extra,\"bytes_ratio\":$ratio,\"speed_ratio\":0.5,\"busbw\":1.25,\"lib_busbw\":2.5"
    else
        extra="$extra,\"msgs_per_rank\":3,\"msgs_optimal\":3,\"time_us\":12.5"
    fi
    emit "{\"event\":\"result\",\"case\":\"$name\",\"group\":\"$group\",\"verdict\":\"$verdict\",\"message\":\"$message\",\"bytes\":$bytes$extra}"
done
emit '{"event":"end"}'
[ "$mode" = wrong ] && exit 1
exit 0
