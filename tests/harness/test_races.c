/* test_races.c - deliberately wrong stream programs: each misses a wait or issues work on
 * the wrong stream. On eager streams (the cpu device's default) every one of them happens
 * to give the right answer; on deferred streams (PL_STREAMS=deferred) each must give a
 * wrong one, the same on every run, as on a GPU. The same programs with their waits
 * must be right in both modes, and a pipeline with its sends on the comm stream and its
 * receives on the compute stream must neither deadlock nor go wrong. (Compute reading
 * what a comm-stream collective has not delivered yet is wrong on eager streams already
 * from 2 ranks: those collectives really are in flight there.)
 *
 *   mpirun -np 3 build/cpu/tests/test_races
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bf16.h" // defines: kern_bf16_from_f32 (the producer of a bf16 collective)
#include "kern_gelu.h" // defines: kern_gelu_forward (a kernels/ kernel as the producer)
#include "pl_defer.h"  // defines: pl_streams_set_deferred, pl_streams_deferred
#include "tap.h"

enum { N = 4096 };
static pl_stream *comp, *comm;
static pl_comm *world;
static int me, np;

/* Worst |got - want| over this rank's n downloaded elements. */
static double off_by(const float *dev, size_t n, float want) {
    float *h = malloc(n * sizeof *h);
    pl_download(h, dev, n * sizeof *h);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)h[i] - want));
    free(h);
    return worst;
}

static void wait_for(pl_stream *waiter, pl_stream *on) {
    pl_event *e = pl_event_create();
    pl_event_record(e, on);
    pl_stream_wait_event(waiter, e);
    pl_event_destroy(e); /* allowed right after the wait, as with CUDA events */
}

/* 1. The comm stream all-reduces what the compute stream fills, without waiting for it. */
static double comm_reads_too_early(bool with_wait) {
    float *a = pl_malloc_floats(N);
    pl_fill(a, 0.0f, N, comp);
    pl_device_sync();
    pl_fill(a, 1.0f, N, comp);
    if (with_wait) wait_for(comm, comp);
    pl_allreduce(a, a, N, PL_SUM, world, comm);
    double e = off_by(a, N, (float)np);
    pl_free(a);
    return e;
}

/* 2. The same with a kernels/ kernel as the producer (deferred kernels keep their args). */
static double kernel_then_comm(bool with_wait) {
    float *a = pl_malloc_floats(N), one = -1.0f, g;
    kern_gelu_forward_ref(&g, &one, 1);
    pl_fill(a, one, N, comp);
    pl_device_sync();
    kern_gelu_forward(a, a, N, comp);
    if (with_wait) wait_for(comm, comp);
    pl_allreduce(a, a, N, PL_SUM, world, comm);
    double e = off_by(a, N, g * (float)np);
    pl_free(a);
    return e;
}

/* 3. Wrong stream, as in a Lab 1 collective: the receive goes on the caller's stream (the
 * comm stream here) but the reduction that reads it on the default stream. */
static double reduce_on_wrong_stream(bool right_stream) {
    float *mine = pl_malloc_floats(N), *tmp = pl_malloc_floats(N);
    pl_fill(mine, 1.0f, N, comm);
    pl_fill(tmp, 0.0f, N, comm);
    pl_device_sync();
    int right = (me + 1) % np, left = (me + np - 1) % np;
    if (np > 1) {
        pl_group_start();
        pl_send(mine, N, right, world, comm);
        pl_recv(tmp, N, left, world, comm);
        pl_group_end();
    } else {
        pl_fill(tmp, 1.0f, N, comm);
    }
    pl_reduce_local(mine, tmp, N, PL_SUM, right_stream ? comm : NULL);
    double e = off_by(mine, N, 2.0f);
    pl_free(mine);
    pl_free(tmp);
    return e;
}

/* 4. Write after read: the compute stream refills a buffer the comm stream is still
 * sending from. */
static double overwrite_while_sending(bool with_wait) {
    float *out = pl_malloc_floats(N), *in = pl_malloc_floats(N);
    pl_fill(out, (float)me, N, comp);
    pl_device_sync();
    int right = (me + 1) % np, left = (me + np - 1) % np;
    pl_group_start();
    pl_send(out, N, right, world, comm);
    pl_recv(in, N, left, world, comm);
    pl_group_end();
    if (with_wait) wait_for(comp, comm);
    pl_fill(out, -1.0f, N, comp); /* the next step's data */
    double e = off_by(in, N, (float)left);
    pl_free(out);
    pl_free(in);
    return e;
}

/* 5. Missing wait before a bf16 collective (Lab 7's gradient shards): the compute stream
 * rounds a gradient to bf16 and the comm stream reduce-scatters it without waiting. */
static double bf16_reduce_scatter_too_early(bool with_wait) {
    size_t n = N / 4, total = n * (size_t)np;
    float *g = pl_malloc_floats(total);
    uint16_t *w = pl_malloc(total * 2), *out = pl_malloc(n * 2), *h = malloc(n * 2);
    pl_memset(w, 0, total * 2, comp);
    pl_fill(g, 1.0f, total, comp);
    pl_device_sync();
    kern_bf16_from_f32(w, g, total, comp);
    if (with_wait) wait_for(comm, comp);
    pl_reduce_scatter_bf16(w, out, n, PL_SUM, world, comm);
    pl_download(h, out, n * 2);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)pl_bf16_to_float(h[i]) - np));
    pl_free(g), pl_free(w), pl_free(out), free(h);
    return worst;
}

/* A correct pipeline: each stage receives on the compute stream, computes, and sends on
 * the comm stream after an event, several micro-batches in flight. */
static double pipeline_two_streams(void) {
    enum { M = 4 };
    float *act[M], *buf = pl_malloc_floats(N);
    for (int m = 0; m < M; m++) act[m] = pl_malloc_floats(N);
    for (int m = 0; m < M; m++) {
        if (me == 0) pl_fill(act[m], (float)m, N, comp);
        else pl_recv(act[m], N, me - 1, world, comp);
        pl_scale(act[m], 2.0f, N, comp);
        if (me + 1 < np) {
            wait_for(comm, comp);
            pl_send(act[m], N, me + 1, world, comm);
        }
    }
    double worst = 0;
    for (int m = 0; m < M; m++) worst = fmax(worst, off_by(act[m], N, (float)m * powf(2.0f, (float)(me + 1))));
    for (int m = 0; m < M; m++) pl_free(act[m]);
    pl_free(buf);
    return worst;
}

typedef double (*scenario)(bool);

static void check(const char *what, scenario run, int min_np) {
    if (np < min_np) return;
    char name[256];
    pl_streams_set_deferred(false);
    double eager_bug = run(false), eager_ok = run(true);
    pl_streams_set_deferred(true);
    double def_bug = run(false), def_bug2 = run(false), def_ok = run(true);
    pl_streams_set_deferred(false);
    snprintf(name, sizeof name, "%s: right on eager streams (the bug hides; off by %g)", what, eager_bug);
    tap_check(eager_bug == 0, name);
    snprintf(name, sizeof name, "%s: wrong on deferred streams (off by %g), the same on a second run", what, def_bug);
    tap_check(def_bug > 0 && def_bug == def_bug2, name);
    snprintf(name, sizeof name, "%s, fixed: right in both modes (off by %g, %g)", what, eager_ok, def_ok);
    tap_check(eager_ok == 0 && def_ok == 0, name);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    comp = pl_stream_compute();
    comm = pl_stream_comm();
    world = pl_comm_world();
    me = pl_rank();
    np = pl_world();

    check("missing wait: comm all-reduce of data the compute stream fills", comm_reads_too_early, 1);
    check("missing wait: comm all-reduce of a kern_gelu output", kernel_then_comm, 1);
    check("wrong stream: reduce of a received block issued on the default stream", reduce_on_wrong_stream, 2);
    check("missing wait: compute refills a buffer the comm stream sends", overwrite_while_sending, 2);
    check("missing wait: comm bf16 reduce-scatter of a gradient the compute stream rounds", bf16_reduce_scatter_too_early, 1);

    pl_streams_set_deferred(true);
    tap_check(pl_streams_deferred(), "deferred streams can be switched on by the harness call (cpu device)");
    /* deferred work waits for a wait: nothing has run until the sync (the cpu device's
     * memory is the host's, so the test may peek) */
    float *x = pl_malloc_floats(16);
    pl_fill(x, 3.0f, 16, comp);
    pl_device_sync();
    pl_fill(x, 4.0f, 16, comp);
    int untouched = x[0] == 3.0f;
    pl_stream_sync(comp);
    tap_check(untouched && x[15] == 4.0f, "deferred: work runs only when something waits for it");
    pl_free(x);
    double pipe = pipeline_two_streams();
    tap_check(pipe == 0, "deferred: a pipeline with sends on the comm stream and receives on compute completes, right");
    pl_streams_set_deferred(false);
    tap_check(pipeline_two_streams() == 0, "eager: the same pipeline is right");
    tap_check(pl_mem_in_use() == 0, "every scenario freed what it allocated");
    return tap_finish();
}
