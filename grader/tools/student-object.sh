#!/usr/bin/env bash
# student-object.sh - compile a student's lab files into one object the driver can trust to
# link with, or refuse them. Called by the Makefile's driver rule (make driver / make lab-N).
#
#   grader/tools/student-object.sh OUT.o PUBLIC.syms API.syms -- CC CFLAGS... -- SRC.c...
#
#  1. each source is compiled with the PUBLIC include path only (no internal headers);
#  2. each object is checked, and refused with a line "forbidden: <file> <why>" (the
#     grading engine classifies the build "forbidden") when it
#       - calls MPI, NCCL or CUDA directly (any MPI_/PMPI_/ompi_/nccl/cuda/cublas symbol),
#       - calls a harness function that is not public (pl_cb, pl_metrics_reset,
#         pl_trace_record, ...: every pl_/kern_/ds_/gpt_/llm_ symbol must be declared in a
#         public header, PUBLIC.syms),
#       - calls what a lab never needs and a forger would: processes (fork, exec, kill,
#         system, exit, pl_init/pl_finalize), files and sockets (open, fopen, socket,
#         connect, write, dup, close), the dynamic loader (dlsym), raw syscalls,
#         signal handlers, the environment block,
#       - holds a raw system-call instruction, or a constructor/destructor (code that would
#         run before the grader's own start-up: .init_array, .ctors, ...);
#  3. the objects are merged (ld -r) and every global symbol that is not the lab's API
#     (API.syms: what the untouched starter defines) is made local, so nothing the student
#     defines can replace a function of the driver, the harness or the C library.
set -u
out=$1 public=$2 api=$3
shift 3
[ "${1:-}" = -- ] || { echo "usage: student-object.sh OUT PUBLIC API -- CC FLAGS -- SRC..." >&2; exit 2; }
shift
cc=() srcs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cc+=("$1"); shift; done
[ $# -gt 0 ] && shift
srcs=("$@")
dir=$out.d
rm -rf "$dir"
mkdir -p "$dir"

# What a lab's code never needs and a forger would use (undefined symbols).
deny_re='^(_?_?(MPI|PMPI|MPIX|ompi|OMPI|opal|pmix|PMIx|mpi)_|nccl|pnccl|cuda|cublas|cu[A-Z]|__cuda)'
deny_sys=' fork vfork clone clone3 __clone execve execv execvp execvpe execl execlp execle fexecve
 posix_spawn posix_spawnp system popen pclose kill killpg tgkill tkill sigqueue ptrace prctl
 syscall setsid setpgid setpgrp daemon open open64 __open_2 __open64_2 openat openat64 creat
 creat64 fopen fopen64 freopen freopen64 fdopen opendir socket socketpair connect bind listen
 accept accept4 send sendto sendmsg write pwrite pwrite64 writev pwritev dup dup2 dup3 mmap
 mmap64 mprotect dlopen dlsym dlvsym dlmopen unlink unlinkat rename renameat link linkat
 symlink symlinkat chmod fchmod chown truncate ftruncate mkdir rmdir remove ioctl fcntl
 fcntl64 signal sigaction sysv_signal bsd_signal environ __environ program_invocation_name
 process_vm_readv process_vm_writev pidfd_open pidfd_send_signal splice tee sendfile exit _exit
 _Exit quick_exit close pl_init pl_finalize '
lib_re='^(pl|plc|drv|kern|ds|gpt|llm)_'

status=0
objs=()
for src in "${srcs[@]}"; do
    obj=$dir/$(basename "${src%.c}").o
    "${cc[@]}" -c "$src" -o "$obj" || exit 1
    objs+=("$obj")
    why=()
    while read -r sym; do
        [ -n "$sym" ] || continue
        if [[ $sym =~ $deny_re ]]; then
            why+=("calls $sym (MPI, NCCL or CUDA directly: use the harness's pl_ calls)")
        elif [[ "$deny_sys" == *" $sym "* ]]; then
            why+=("calls $sym (starting or ending processes, files, sockets, signals and system calls are not part of a lab)")
        elif [[ $sym =~ $lib_re ]] && ! grep -qx "$sym" "$public"; then
            why+=("calls $sym (an internal function of the harness or the grader: only the public API is allowed)")
        fi
    done < <(nm -u --format=posix "$obj" | awk '{print $1}' | sed 's/@.*//')
    if readelf -S --wide "$obj" | grep -Eq '\.(init_array|fini_array|preinit_array|ctors|dtors)\b'; then
        why+=("defines a constructor or destructor (code that would run before or after the grader's own)")
    fi
    if objdump -d "$obj" | grep -Eq $'\t(syscall|sysenter|int +\\$0x80)\\b'; then
        why+=("holds a raw system-call instruction")
    fi
    for w in "${why[@]}"; do
        echo "forbidden: $src $w"
        status=1
    done
done
[ $status -eq 0 ] || exit 1

# The sanitizer flavour (make SANITIZE=address): the checks above ran on plain objects (a
# sanitizer adds its own constructor and calls); the objects merged are the same sources
# compiled with the sanitizer as well.
if [ -n "${PL_SANITIZE_CFLAGS:-}" ]; then
    for i in "${!srcs[@]}"; do
        # shellcheck disable=SC2086
        "${cc[@]}" $PL_SANITIZE_CFLAGS -c "${srcs[$i]}" -o "${objs[$i]}" || exit 1
    done
fi
if [ ${#objs[@]} -eq 0 ]; then
    # a lab without student files (Lab 0): an empty object
    echo "" | "${cc[@]}" -x c -c - -o "$out" || exit 1
    exit 0
fi
ld -r -o "$dir/merged.o" "${objs[@]}" || exit 1
objcopy --keep-global-symbols="$api" "$dir/merged.o" "$out" || exit 1
rm -rf "$dir"
