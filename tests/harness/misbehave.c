/* misbehave.c - programs that go wrong on purpose, for the watchdog and crash tests:
 *   deadlock: every rank sends to its right neighbour before receiving (no group)
 *   crash:    rank 1 (or 0) writes through a NULL pointer
 *   hang:     rank 0 never enters the exchange; the others wait for it
 *   trace:    a little traffic and a region, with --trace FILE
 *   mismatch: a send of 1024 floats matched by a receive of 256
 *   stuck-collective: rank 0 spins while the others wait in pl_allreduce
 *   slow:     rank 0 advances in small steps for three watchdog periods, then sends; the
 *             others wait for it in pl_recv (progress: no deadlock)
 *   slow-call: rank 0 is inside one GEMM far longer than the watchdog period, then sends
 *   slow-host: rank 0 computes on the host, outside the harness, for two watchdog periods
 *             (as the grader's own checks may), then sends
 *   group-reuse: one group sends half a buffer and receives into its middle */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
    } else if (!strcmp(argv[1], "slow") || !strcmp(argv[1], "slow-call") || !strcmp(argv[1], "slow-host")) {
        if (me == 0 && !strcmp(argv[1], "slow-host")) {
            volatile double x = 0;
            for (double until = pl_now() + 2 * pl_info()->watchdog_sec; pl_now() < until;)
                for (int i = 0; i < 100000; i++) x += 1e-9 * i;
        } else if (me == 0 && !strcmp(argv[1], "slow")) {
            double until = pl_now() + 3 * pl_info()->watchdog_sec;
            struct timespec nap = {0, 50000000};
            while (pl_now() < until) {
                pl_fill(buf, 2, 1024, NULL); /* a little harness work, then a pause */
                pl_stream_sync(NULL);
                nanosleep(&nap, NULL);
            }
        } else if (me == 0) {
            enum { G = 3072 };
            float *a = pl_malloc_floats((size_t)G * G), *c = pl_malloc_floats((size_t)G * G);
            pl_fill(a, 1, (size_t)G * G, NULL);
            double t0 = pl_now();
            pl_gemm(false, false, G, G, G, 1, a, G, a, G, 0, c, G, NULL);
            pl_stream_sync(NULL);
            pl_log("one GEMM took %.1f s (watchdog %.1f s)", pl_now() - t0, pl_info()->watchdog_sec);
            pl_free(a);
            pl_free(c);
        }
        if (n > 1 && me == 0) for (int r = 1; r < n; r++) pl_send(buf, 1024, r, pl_comm_world(), NULL);
        if (me != 0) pl_recv(buf, 1024, 0, pl_comm_world(), NULL);
    } else if (!strcmp(argv[1], "group-reuse")) {
        pl_group_start();
        pl_send(buf, 512, right, pl_comm_world(), NULL);
        pl_recv(buf + 256, 512, left, pl_comm_world(), NULL);
        pl_group_end();
        pl_stream_sync(NULL);
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
