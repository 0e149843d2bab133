/* confine_probe.c - the play filter (grader/runner/confine.c) seen from inside: a process
 * installs it and tries calls by their arguments. With the argument "referee", the filter of
 * a player whose referee moves its messages (no socket, no segment, no file removed).
 * Prints "ok - ..." / "not ok - ..." lines; built and run by tests/grader/test_confine.sh. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

#include "confine.h"

static int failed;
static const char *g_which = "play filter";
static void expect(const char *what, int rc, int want_errno) {
    int got = rc < 0 ? errno : 0;
    if (got == want_errno) printf("ok - %s: %s (%s)\n", g_which, what, got ? "refused" : "allowed");
    else {
        printf("not ok - %s: %s (errno %d, expected %d)\n", g_which, what, got, want_errno);
        failed = 1;
    }
}

int main(int argc, char **argv) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    bool own_mpi = !(argc > 1 && !strcmp(argv[1], "referee"));
    if (!own_mpi) g_which = "play filter (referee's transport)";
    if (!confine_play(getpid(), false, own_mpi)) {
        printf("not ok - play filter: installs (errno %d)\n", errno);
        return 1;
    }
    int fl = fcntl(sv[0], F_GETFL);
    expect("fcntl F_GETFL", fl, 0);
    expect("fcntl F_SETFL O_NONBLOCK", fcntl(sv[0], F_SETFL, fl | O_NONBLOCK), 0);
    expect("fcntl F_SETFD FD_CLOEXEC", fcntl(sv[0], F_SETFD, FD_CLOEXEC), 0);
    int d = fcntl(sv[0], F_DUPFD_CLOEXEC, 10);
    expect("fcntl F_DUPFD_CLOEXEC", d, 0);
    /* the control socket's signals pointed at another process: never */
    expect("fcntl F_SETOWN to the parent", fcntl(sv[0], F_SETOWN, (int)getppid()), EPERM);
    struct f_owner_ex owner = {F_OWNER_PID, getppid()};
    expect("fcntl F_SETOWN_EX to the parent", fcntl(sv[0], F_SETOWN_EX, &owner), EPERM);
    expect("fcntl F_SETSIG SIGKILL", fcntl(sv[0], F_SETSIG, SIGKILL), EPERM);
    expect("fcntl F_NOTIFY", fcntl(sv[0], F_NOTIFY, DN_MODIFY), EPERM);
    expect("open of any file", open("/etc/hostname", O_RDONLY), EACCES);
    expect("kill of the parent", kill(getppid(), 0), EPERM);
    void *rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect("mmap read-write", rw == MAP_FAILED ? -1 : 0, 0);
    void *rx = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect("mmap executable", rx == MAP_FAILED ? -1 : 0, EPERM);
    expect("mprotect read-only", rw == MAP_FAILED ? -1 : mprotect(rw, 4096, PROT_READ), 0);
    expect("mprotect executable", rw == MAP_FAILED ? -1 : mprotect(rw, 4096, PROT_READ | PROT_EXEC), EPERM);
    /* the channel it was given still works */
    char byte = 1;
    expect("write on the control socket", write(sv[0], &byte, 1) == 1 ? 0 : -1, 0);
    expect("read on the control socket", read(sv[1], &byte, 1) == 1 ? 0 : -1, 0);
    /* MPI's own needs, granted only where the player runs MPI */
    expect("socket", socket(AF_INET, SOCK_STREAM, 0), own_mpi ? 0 : EPERM);
    expect("a private System V segment", shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600), own_mpi ? 0 : EPERM);
    expect("unlinkat", unlinkat(AT_FDCWD, "/nonexistent-paralab-probe", 0), own_mpi ? ENOENT : EPERM);
    expect("connect on the control socket", connect(sv[0], NULL, 0), own_mpi ? EINVAL : EPERM);
    return failed;
}
