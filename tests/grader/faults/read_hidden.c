// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 4: a rank reads --hidden DIR from its parents' command lines (/proc/<ppid>/
 * cmdline, up the chain to pl-grade) and copies the hidden rubric into a message that would
 * land in the public results. The object checker refuses fopen(); the engine wipes its own
 * command line after parsing, the sandbox hides the hidden directory and the engine's /proc,
 * and hidden cases never reach the public items. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    char path[64], cmdline[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i + 9 < n; i++)
        if (!strcmp(cmdline + i, "--hidden")) fprintf(stderr, "hidden dir: %s\n", cmdline + i + 9);
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
