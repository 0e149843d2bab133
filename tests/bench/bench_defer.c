/* bench_defer: what deferred streams (PL_STREAMS=deferred) cost per operation, against the
 * same operations on eager streams, interleaved in one run: a kernel on a tiny buffer (the
 * queue's own cost: a record, a copy of the arguments, a run), on a large one (the work
 * itself), and an all-reduce on the comm stream after an event wait (staging and the
 * loop that completes it). Prints `ratio` lines: eager time / deferred time. cpu device.
 *
 *   mpirun -np 2 build/cpu/bench/bench_defer
 */
#include <stdio.h>
#include <stdlib.h>

#include "kern_gelu.h" // defines: kern_gelu_forward
#include "pl.h"
#include "pl_defer.h"  // defines: pl_streams_set_deferred
#include "pl_instrument.h" // defines: pl_host_allreduce

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { ROUNDS = 7 };

/* `ops` operations then a device sync (after one round to warm up); seconds per op, the
 * slowest rank's. */
static double time_ops(int which, float *buf, size_t n, int ops) {
    double t = 0;
    pl_event *e = pl_event_create();
    for (int r = -1; r < 1; r++) {
        pl_barrier(pl_comm_world());
        double t0 = pl_now();
        for (int i = 0; i < ops; i++) {
            if (which == 0) {
                kern_gelu_forward(buf, buf, n, NULL);
            } else {
                pl_scale(buf, 0.5f, n, NULL);
                pl_event_record(e, NULL);
                pl_stream_wait_event(pl_stream_comm(), e);
                pl_allreduce(buf, buf, n, PL_SUM, pl_comm_world(), pl_stream_comm());
                pl_event_record(e, pl_stream_comm());
                pl_stream_wait_event(NULL, e);
            }
        }
        pl_device_sync();
        t = (pl_now() - t0) / ops;
    }
    pl_event_destroy(e);
    pl_host_allreduce(&t, 1, PL_HOST_MAX, NULL);
    return t;
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CPU) pl_usage_error("bench_defer measures the cpu device's deferred streams");
    struct { const char *what; int which; size_t n; int ops; } cases[] = {
        {"kern_gelu_forward, 16 floats", 0, 16, 5000},
        {"kern_gelu_forward, 1M floats", 0, 1 << 20, 5},
        {"scale + comm-stream allreduce with event waits, 1K floats", 1, 1 << 10, 100},
        {"scale + comm-stream allreduce with event waits, 1M floats", 1, 1 << 20, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float *buf = pl_malloc_floats(cases[c].n);
        pl_fill(buf, 0.25f, cases[c].n, NULL);
        double t[2], r[2][ROUNDS];
        for (int k = 0; k < ROUNDS; k++) /* the modes in turn, the median of each */
            for (int mode = 0; mode < 2; mode++) {
                pl_streams_set_deferred(mode == 1);
                r[mode][k] = time_ops(cases[c].which, buf, cases[c].n, cases[c].ops);
            }
        pl_streams_set_deferred(false);
        for (int mode = 0; mode < 2; mode++) {
            qsort(r[mode], ROUNDS, sizeof(double), cmp);
            t[mode] = r[mode][ROUNDS / 2];
        }
        if (pl_rank() == 0)
            printf("ratio deferred streams, %s: eager / deferred time %6.3f   (eager %.2f us, deferred %.2f us per op, %d ranks)\n",
                   cases[c].what, t[0] / t[1], t[0] * 1e6, t[1] * 1e6, pl_world());
        pl_free(buf);
    }
    pl_finalize();
    return 0;
}
