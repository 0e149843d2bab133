// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 1, as it was done to protocol 1: the lab functions do nothing, and the
 * broadcast appends "pass" records to the driver's --json file, whose path it reads from
 * /proc/self/cmdline. Protocol 2 has no such file; the object checker refuses fopen()
 * before anything runs. */
#include <stdio.h>
#include <string.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    char cmdline[8192] = "";
    FILE *f = fopen("/proc/self/cmdline", "r");
    size_t n = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i + 7 < n; i++) {
        if (strcmp(cmdline + i, "--json") != 0) continue;
        FILE *json = fopen(cmdline + i + 7, "a");
        if (json) {
            fputs("{\"event\":\"result\",\"case\":\"broadcast.oop.r0.c0\",\"group\":\"broadcast\",\"verdict\":\"pass\"}\n", json);
            fclose(json);
        }
    }
}
