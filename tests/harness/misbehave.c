/* misbehave.c - programs that go wrong on purpose, for the watchdog and crash tests:
 *   deadlock: every rank sends to its right neighbour before receiving (no group)
 *   crash:    rank 1 (or 0) writes through a NULL pointer
 *   hang:     rank 0 never enters the exchange; the others wait for it
 *   trace:    a little traffic and a region, with --trace FILE
 *   mismatch: a send of 1024 floats matched by a receive of 256
 *   stuck-collective: rank 0 spins while the others wait in pl_allreduce */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pl.h"

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (argc < 2) pl_usage_error("usage: misbehave deadlock|crash|hang|trace");
    int n = pl_world(), me = pl_rank();
    float *buf = pl_malloc_floats(1024);
    pl_fill(buf, 1, 1024, NULL);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    if (!strcmp(argv[1], "deadlock")) {
        pl_send(buf, 1024, right, pl_comm_world(), NULL);
        pl_recv(buf, 1024, left, pl_comm_world(), NULL);
    } else if (!strcmp(argv[1], "crash")) {
        if (me == (n > 1 ? 1 : 0)) {
            volatile uintptr_t addr = 16; /* an address nothing maps */
            *(volatile float *)addr = 1.0f;
        }
        pl_barrier(pl_comm_world());
    } else if (!strcmp(argv[1], "hang")) {
        if (me != 0) pl_recv(buf, 1024, 0, pl_comm_world(), NULL);
        else for (;;) {}
    } else if (!strcmp(argv[1], "trace")) {
        pl_region_begin("exchange");
        pl_group_start();
        if (n > 1) {
            pl_send(buf, 512, right, pl_comm_world(), NULL);
            pl_recv(buf + 512, 512, left, pl_comm_world(), NULL);
        }
        pl_group_end();
        pl_region_end();
        pl_allreduce(buf, buf, 1024, PL_SUM, pl_comm_world(), pl_stream_comm());
        pl_gemm(false, false, 8, 8, 8, 1, buf, 8, buf + 64, 8, 0, buf + 128, 8, NULL);
    } else if (!strcmp(argv[1], "stuck-collective")) {
        /* the others block inside a blocking library collective: the watchdog thread */
        if (me == 0) for (;;) {}
        pl_allreduce(buf, buf, 1024, PL_SUM, pl_comm_world(), NULL);
    } else if (!strcmp(argv[1], "mismatch")) {
        /* a send and its receive that disagree on the count */
        if (n > 1 && me == 0) pl_send(buf, 1024, 1, pl_comm_world(), NULL);
        if (n > 1 && me == 1) pl_recv(buf, 256, 0, pl_comm_world(), NULL);
    } else {
        pl_usage_error("unknown mode '%s'", argv[1]);
    }
    pl_free(buf);
    pl_finalize();
    return 0;
}
