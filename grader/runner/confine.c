/* confine.c - the seccomp filters around a player (Linux). Compiled into both binaries:
 * the referee installs the start-up filter in its forked child right before exec; the
 * player's runner installs the play filter once MPI and the device are up, before any
 * student code runs. Filters stack and cannot be removed: the stricter one rules.
 *
 *   start-up  everything a process needs to start MPI and a device, except what reaches
 *             other processes: ptrace, reading or writing their memory, signals to anyone
 *             but itself, changing limits, namespaces and mounts, kernel modules, BPF,
 *             io_uring (which would bypass the filter), new processes (clone for threads
 *             only), and execve of anything but the player (the one path the referee
 *             passes)
 *   play      an allow-list: what a running rank of the kit needs (memory, threads, time,
 *             futexes, the sockets and pipes already open, Open MPI's polling, and the
 *             unlink of its shared-memory segment at MPI_Finalize), measured with strace
 *             over every lab; opening files, forking, exec, signals to others, ptrace and
 *             everything not listed fail with EPERM (EACCES for open)
 * The list of what the player may do is the filter; docs/grader.md shows it. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"

#if defined(__x86_64__)
#define ARCH_NR AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH_NR AUDIT_ARCH_AARCH64
#else
#define ARCH_NR 0
#endif

#define MAX_INSNS 512
typedef struct {
    struct sock_filter f[MAX_INSNS];
    int n;
    bool overflow;
} prog;

static void emit(prog *p, struct sock_filter s) {
    if (p->n < MAX_INSNS) p->f[p->n++] = s;
    else p->overflow = true;
}
#define STMT(code, k) ((struct sock_filter)BPF_STMT((code), (k)))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP((code), (k), (jt), (jf)))
#define LOAD_ARG_LO(i) STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define LOAD_ARG_HI(i) STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]) + 4)
#define RET(v) STMT(BPF_RET | BPF_K, (v))
#define ERRNO(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

static void start(prog *p) {
    p->n = 0;
    p->overflow = false;
    emit(p, STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_NR, 1, 0));
    emit(p, RET(SECCOMP_RET_KILL_PROCESS));
    emit(p, STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* nr -> action */
static void rule(prog *p, long nr, uint32_t action) {
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    emit(p, RET(action));
}

/* nr with 64-bit argument i == value -> allow, otherwise -> action. */
static void rule_arg_eq(prog *p, long nr, int i, uint64_t value, uint32_t otherwise) {
    /* not this call: jump over the rule with the number still loaded */
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 6));
    emit(p, LOAD_ARG_LO(i));
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)value, 0, 3));
    emit(p, LOAD_ARG_HI(i));
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(value >> 32), 0, 1));
    emit(p, RET(SECCOMP_RET_ALLOW));
    emit(p, RET(otherwise));
}

/* nr with the low 32 bits of argument i, less the bits of `ignore`, one of values[0..n) ->
 * allow, otherwise -> action (n <= 4). */
static void rule_arg_in(prog *p, long nr, int i, uint32_t ignore, const uint32_t *values, int n, uint32_t otherwise) {
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)(n + 4)));
    emit(p, LOAD_ARG_LO(i));
    emit(p, STMT(BPF_ALU | BPF_AND | BPF_K, ~ignore));
    for (int k = 0; k < n; k++) emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, values[k], (uint8_t)(n - k), 0));
    emit(p, RET(otherwise));
    emit(p, RET(SECCOMP_RET_ALLOW));
}

/* nr: when (argument i & mask) is nonzero exactly as `set` says -> allow, otherwise -> action
 * (the low 32 bits). */
static void rule_arg_bits(prog *p, long nr, int i, uint32_t mask, bool set, uint32_t otherwise) {
    emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4));
    emit(p, LOAD_ARG_LO(i));
    emit(p, JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
    emit(p, RET(set ? SECCOMP_RET_ALLOW : otherwise)); /* some bit of mask set */
    emit(p, RET(set ? otherwise : SECCOMP_RET_ALLOW)); /* none */
}

static bool install(prog *p) {
    if (p->overflow) {
        errno = E2BIG;
        return false;
    }
    struct sock_fprog fp = {.len = (unsigned short)p->n, .filter = p->f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) == 0;
}

/* What no player ever needs, at any time. */
static const long k_never[] = {
#ifdef __NR_ptrace
    __NR_ptrace,
#endif
#ifdef __NR_process_vm_readv
    __NR_process_vm_readv, __NR_process_vm_writev,
#endif
#ifdef __NR_pidfd_open
    __NR_pidfd_open, __NR_pidfd_send_signal,
#endif
#ifdef __NR_pidfd_getfd
    __NR_pidfd_getfd,
#endif
#ifdef __NR_rt_sigqueueinfo
    __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo,
#endif
#ifdef __NR_setrlimit
    __NR_setrlimit,
#endif
#ifdef __NR_personality
    __NR_personality,
#endif
    __NR_unshare, __NR_setns, __NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot,
#ifdef __NR_open_tree
    __NR_open_tree, __NR_move_mount, __NR_fsopen, __NR_fsmount, __NR_fsconfig, __NR_fspick,
#endif
    __NR_init_module, __NR_finit_module, __NR_delete_module, __NR_kexec_load,
#ifdef __NR_kexec_file_load
    __NR_kexec_file_load,
#endif
    __NR_bpf, __NR_perf_event_open, __NR_userfaultfd, __NR_keyctl, __NR_add_key, __NR_request_key,
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
#endif
    __NR_reboot, __NR_swapon, __NR_swapoff, __NR_acct, __NR_settimeofday, __NR_clock_settime,
#ifdef __NR_iopl
    __NR_iopl, __NR_ioperm,
#endif
    __NR_setuid, __NR_setgid, __NR_setreuid, __NR_setregid, __NR_setresuid, __NR_setresgid, __NR_setgroups,
    __NR_setfsuid, __NR_setfsgid, __NR_setsid, __NR_setpgid, __NR_vhangup, __NR_quotactl,
#ifdef __NR_fanotify_init
    __NR_fanotify_init,
#endif
#ifdef __NR_name_to_handle_at
    __NR_name_to_handle_at, __NR_open_by_handle_at,
#endif
};

/* Signals go to this process only (pid and tgid equal to its own, or 0 = its group). */
static void signals_to_self(prog *p, pid_t self) {
    rule_arg_eq(p, __NR_kill, 0, (uint64_t)(int64_t)self, ERRNO(EPERM));
    rule_arg_eq(p, __NR_tgkill, 0, (uint64_t)(int64_t)self, ERRNO(EPERM));
    rule(p, __NR_tkill, ERRNO(EPERM));
    /* prlimit64 on itself with no new limit (a query) only */
    rule_arg_eq(p, __NR_prlimit64, 2, 0, ERRNO(EPERM));
}

bool confine_startup(pid_t self, const char *exec_path) {
    prog p;
    start(&p);
    for (size_t i = 0; i < sizeof k_never / sizeof k_never[0]; i++) rule(&p, k_never[i], ERRNO(EPERM));
    signals_to_self(&p, self);
    /* execve of the player only: the one pointer the referee's child passes */
    rule_arg_eq(&p, __NR_execve, 0, (uint64_t)(uintptr_t)exec_path, ERRNO(EPERM));
    /* threads, never processes (MPI_Init under a launcher forks nothing) */
    rule_arg_bits(&p, __NR_clone, 0, CLONE_THREAD, true, ERRNO(EPERM));
#ifdef __NR_clone3
    rule(&p, __NR_clone3, ERRNO(ENOSYS));
#endif
#ifdef __NR_fork
    rule(&p, __NR_fork, ERRNO(EPERM));
    rule(&p, __NR_vfork, ERRNO(EPERM));
#endif
#ifdef __NR_execveat
    rule(&p, __NR_execveat, ERRNO(EPERM));
#endif
    emit(&p, RET(SECCOMP_RET_ALLOW));
    return install(&p);
}

/* ---------------------------------------------------------------- the play filter */

static const long k_play_allowed[] = {
    __NR_read, __NR_write, __NR_readv, __NR_writev, __NR_pread64, __NR_pwrite64, __NR_close, __NR_lseek,
    __NR_fstat, __NR_newfstatat, __NR_getdents64,
#ifdef __NR_statx
    __NR_statx,
#endif
#ifdef __NR_poll
    __NR_poll, __NR_select,
#endif
    __NR_ppoll, __NR_pselect6, __NR_epoll_pwait, __NR_epoll_ctl,
#ifdef __NR_epoll_wait
    __NR_epoll_wait,
#endif
#ifdef __NR_epoll_pwait2
    __NR_epoll_pwait2,
#endif
    __NR_futex,
#ifdef __NR_futex_waitv
    __NR_futex_waitv,
#endif
    __NR_sched_yield, __NR_nanosleep, __NR_clock_nanosleep, __NR_clock_gettime, __NR_clock_getres,
    __NR_gettimeofday,
#ifdef __NR_time
    __NR_time,
#endif
    __NR_munmap, __NR_mremap, __NR_madvise, __NR_brk, __NR_membarrier, /* mmap, mprotect: below */
    __NR_get_mempolicy, __NR_set_mempolicy, __NR_mbind,
    __NR_getpid, __NR_gettid, __NR_getppid, __NR_getuid, __NR_geteuid, __NR_getgid, __NR_getegid,
    __NR_getresuid, __NR_getresgid, __NR_getrusage, __NR_times, __NR_sysinfo, __NR_uname,
    __NR_rt_sigprocmask, __NR_rt_sigreturn, __NR_rt_sigaction, __NR_sigaltstack, __NR_restart_syscall,
    __NR_exit, __NR_exit_group, __NR_getrandom, __NR_sched_getaffinity, __NR_set_robust_list,
    __NR_get_robust_list,
#ifdef __NR_rseq
    __NR_rseq,
#endif
};

/* What the player's own MPI needs besides (not granted where the referee moves the
 * messages: that player has only its control socket, already open). */
static const long k_play_mpi[] = {
    /* MPI between processes: shared memory polled, and sockets (the TCP transport between
     * nodes connects on first use) */
    __NR_socket, __NR_connect, __NR_accept4, __NR_sendto, __NR_recvfrom, __NR_sendmsg, __NR_recvmsg,
    __NR_sendmmsg, __NR_recvmmsg, __NR_shutdown, __NR_getsockopt, __NR_setsockopt, __NR_getsockname,
    __NR_getpeername,
    /* MPI_Finalize removes the shared-memory segment it made at start-up (the sandbox
     * of `make grade` keeps everything else read-only) */
    __NR_unlinkat,
#ifdef __NR_unlink
    __NR_unlink,
#endif
#ifdef __NR_accept
    __NR_accept,
#endif
};

/* The end of the play filter, whatever transport: fcntl by command, code mappings, files. */
static void emit_play_tail(prog *pp, bool device_files) {
    /* fcntl: descriptor flags, status flags, locks, duplicates: what a C library and MPI
     * use. Never the owner or signal of a descriptor (F_SETOWN, F_SETOWN_EX, F_SETSIG: with
     * O_ASYNC on the control socket the kernel would signal the referee), leases or
     * directory notifications. */
    static const uint32_t fcntl_cmds[] = {0 /* F_DUPFD */,      1 /* F_GETFD */,         2 /* F_SETFD */,
                                          3 /* F_GETFL */,      4 /* F_SETFL */,         5 /* F_GETLK */,
                                          6 /* F_SETLK */,      7 /* F_SETLKW */,        36 /* F_OFD_GETLK */,
                                          37 /* F_OFD_SETLK */, 38 /* F_OFD_SETLKW */,   1030 /* F_DUPFD_CLOEXEC */,
                                          1032 /* F_GETPIPE_SZ */, 1034 /* F_GET_SEALS */};
    rule_arg_in(pp, __NR_fcntl, 1, 0, fcntl_cmds, (int)(sizeof fcntl_cmds / sizeof fcntl_cmds[0]), ERRNO(EPERM));
    if (device_files) { /* the CUDA driver talks to its device files and may open them */
        rule(pp, __NR_mmap, SECCOMP_RET_ALLOW); /* and maps kernels it loads as code */
        rule(pp, __NR_mprotect, SECCOMP_RET_ALLOW);
        rule(pp, __NR_ioctl, SECCOMP_RET_ALLOW);
        rule(pp, __NR_openat, SECCOMP_RET_ALLOW);
    } else {
        /* no new code once the student's code runs: every library is mapped by then, so no
         * mapping made or changed from here on may be executable (PROT_EXEC, 0x4) */
        rule_arg_bits(pp, __NR_mmap, 2, 0x4, false, ERRNO(EPERM));
        rule_arg_bits(pp, __NR_mprotect, 2, 0x4, false, ERRNO(EPERM));
        rule(pp, __NR_openat, ERRNO(EACCES));
#ifdef __NR_open
        rule(pp, __NR_open, ERRNO(EACCES));
#endif
    }
    emit(pp, RET(ERRNO(EPERM)));
}

bool confine_play(pid_t self, bool device_files, bool own_mpi) {
    prog p;
    start(&p);
    signals_to_self(&p, self);
    /* threads, never processes: clone only with CLONE_THREAD; clone3's flags sit behind a
     * pointer the filter cannot read, so it says ENOSYS and the C library falls back */
    rule_arg_bits(&p, __NR_clone, 0, CLONE_THREAD, true, ERRNO(EPERM));
#ifdef __NR_clone3
    rule(&p, __NR_clone3, ERRNO(ENOSYS));
#endif
    for (size_t i = 0; i < sizeof k_play_allowed / sizeof k_play_allowed[0]; i++)
        rule(&p, k_play_allowed[i], SECCOMP_RET_ALLOW);
    if (!own_mpi) { /* no socket, no segment, no file removed: only the referee's channel */
        emit_play_tail(&p, device_files);
        return install(&p);
    }
    for (size_t i = 0; i < sizeof k_play_mpi / sizeof k_play_mpi[0]; i++)
        rule(&p, k_play_mpi[i], SECCOMP_RET_ALLOW);
    /* Symmetric memory made while the student's code runs (pl_sym_malloc: Open MPI's
     * MPI_Win_allocate_shared) needs a segment every rank of the node maps. Open MPI's
     * default makes it a file in /dev/shm, which open() may not; the referee starts the
     * player with OMPI_MCA_shmem=sysv instead, whose calls are these, measured with strace
     * (osc/sm, Open MPI 4.1): a private segment made (shmget with IPC_PRIVATE, never a key
     * another process could name), attached and detached, and marked for removal at once
     * (shmctl IPC_RMID: it goes when the last rank detaches, even from a crash). Nothing
     * else of shmctl (IPC_SET would change a segment's owner or mode). */
    rule_arg_eq(&p, __NR_shmget, 0, 0 /* IPC_PRIVATE */, ERRNO(EPERM));
    rule(&p, __NR_shmat, SECCOMP_RET_ALLOW);
    rule(&p, __NR_shmdt, SECCOMP_RET_ALLOW);
    static const uint32_t shmctl_cmds[] = {0 /* IPC_RMID */};
    rule_arg_in(&p, __NR_shmctl, 1, 0x100 /* IPC_64, which some C libraries add */, shmctl_cmds, 1, ERRNO(EPERM));
    emit_play_tail(&p, device_files);
    return install(&p);
}
