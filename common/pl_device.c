/* pl_device.c - the generic device layer: argument checks, streams and events, transfers,
 * local operations and GEMM as device work (pl_launch: now, or queued on a deferred
 * stream), their instrumentation; the backend in pl_dev does the work. The second half is
 * the deferred streams of the cpu device (pl_defer.h): device work as closures, a queue per
 * stream and the loop that empties them; the comm layer gives it its work as pl_comm_work
 * (post, test, commit), so nothing here knows about MPI. Streams and their queues are one
 * file because each needs the other: a stream syncs by running its queue, the queue runs
 * work on the streams. Allocation is in pl_memguard.c. */
#include <sched.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"  // defines: pl_dev, struct pl_stream, struct pl_event
#include "pl_defer.h"    // defines: pl_launch, pl_defer_run, pl_defer_wait, pl_streams_deferred
#include "pl_internal.h" // defines: pl_mem_track_*, pl_trace_*, pl_progress_* hooks

static pl_stream g_compute = {.id = 0}, g_comm = {.id = 1};
static void (*g_drain)(pl_stream *s); /* the comm layer's: completes pending operations */

void pl_device_set_drain(void (*drain)(pl_stream *s)) { g_drain = drain; }

pl_stream *pl_stream_compute(void) { return &g_compute; }
pl_stream *pl_stream_comm(void) { return &g_comm; }
pl_stream *pl_stream_resolve(pl_stream *s) { return s ? s : &g_compute; }

void pl_device_setup_streams(void) {
    if (pl_dev->stream_create) {
        pl_dev->stream_create(&g_compute);
        pl_dev->stream_create(&g_comm);
    }
    /* cpu + mpi: collectives on the comm stream stay in flight until something waits */
    g_comm.async = true;
    g_compute.async = false;
}

void pl_device_teardown_streams(void) {
    if (pl_dev->stream_destroy) {
        pl_dev->stream_destroy(&g_compute);
        pl_dev->stream_destroy(&g_comm);
    }
}

/* In-order streams: work issued on s runs after s's pending work (eager: its pending
 * communication; deferred: everything queued on it). */
pl_stream *pl_stream_ready(pl_stream *s) {
    s = pl_stream_resolve(s);
    if (pl_streams_deferred()) pl_defer_run(s, s->q_enq);
    if (s->completed != s->issued && g_drain) g_drain(s);
    return s;
}
int pl_stream_id(const pl_stream *s) { return s ? s->id : 0; }
void *pl_stream_native(pl_stream *s) { return pl_stream_resolve(s)->native; }

void pl_upload(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    PL_CHECK(dst && src, "pl_upload with a NULL pointer");
    pl_device_sync();
    pl_dev->upload(dst, src, bytes);
}

void pl_download(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    PL_CHECK(dst && src, "pl_download with a NULL pointer");
    pl_device_sync();
    pl_dev->download(dst, src, bytes);
}

/* -- local operations: one record of arguments, run now or when the stream gets to it -- */
typedef enum { OP_COPY, OP_MEMSET, OP_FILL, OP_REDUCE, OP_SCALE } local_kind;
typedef struct {
    local_kind kind;
    void *dst;
    const void *src;
    size_t n; /* bytes for copy and memset, elements otherwise */
    float value;
    int byte;
    pl_op op;
} local_args;

static void run_local(void *p, pl_stream *s) {
    const local_args *a = p;
    switch (a->kind) {
    case OP_COPY: pl_dev->copy(a->dst, a->src, a->n, s); break;
    case OP_MEMSET: pl_dev->memset(a->dst, a->byte, a->n, s); break;
    case OP_FILL: pl_dev->fill(a->dst, a->value, a->n, s); break;
    case OP_REDUCE: pl_dev->reduce_local(a->dst, a->src, a->n, a->op, s); break;
    case OP_SCALE: pl_dev->scale(a->dst, a->value, a->n, s); break;
    }
}

static void launch_local(const char *name, double bytes, double flops, local_args a, pl_stream *s) {
    pl_trace_event rec = {.kind = PL_OP_KERNEL, .peer = -1, .name = name, .bytes = (uint64_t)bytes,
                          .flops = flops};
    pl_launch(s, &rec, run_local, &a, sizeof a);
}

void pl_copy(void *dst, const void *src, size_t bytes, pl_stream *s) {
    if (!bytes || dst == src) return;
    PL_CHECK(dst && src, "pl_copy with a NULL pointer");
    launch_local("copy", 2.0 * (double)bytes, 0, (local_args){.kind = OP_COPY, .dst = dst, .src = src, .n = bytes}, s);
}

void pl_memset(void *p, int byte, size_t bytes, pl_stream *s) {
    if (!bytes) return;
    PL_CHECK(p != NULL, "pl_memset with a NULL pointer");
    launch_local("memset", (double)bytes, 0, (local_args){.kind = OP_MEMSET, .dst = p, .byte = byte, .n = bytes}, s);
}

void pl_fill(float *p, float v, size_t n, pl_stream *s) {
    if (!n) return;
    PL_CHECK(p != NULL, "pl_fill with a NULL pointer");
    launch_local("fill", 4.0 * (double)n, 0, (local_args){.kind = OP_FILL, .dst = p, .value = v, .n = n}, s);
}

void pl_reduce_local(float *dst, const float *src, size_t n, pl_op op, pl_stream *s) {
    if (!n) return;
    PL_CHECK(dst && src, "pl_reduce_local with a NULL pointer");
    launch_local("reduce_local", 12.0 * (double)n, (double)n,
                 (local_args){.kind = OP_REDUCE, .dst = dst, .src = src, .n = n, .op = op}, s);
}

void pl_scale(float *p, float alpha, size_t n, pl_stream *s) {
    if (!n) return;
    PL_CHECK(p != NULL, "pl_scale with a NULL pointer");
    launch_local("scale", 8.0 * (double)n, (double)n, (local_args){.kind = OP_SCALE, .dst = p, .value = alpha, .n = n}, s);
}

typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_args;

static void run_gemm(void *p, pl_stream *s) {
    const gemm_args *g = p;
    pl_dev->gemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta,
                 g->C, g->ldc, s);
}

void pl_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, pl_stream *s) {
    PL_CHECK(m >= 0 && n >= 0 && k >= 0, "pl_gemm: negative dimension");
    /* Row-major: op(A) is m x k, stored as m x k (lda >= k) or k x m (lda >= m). */
    PL_CHECK(lda >= (ta ? (m > 1 ? m : 1) : (k > 1 ? k : 1)), "pl_gemm: lda too small");
    PL_CHECK(ldb >= (tb ? (k > 1 ? k : 1) : (n > 1 ? n : 1)), "pl_gemm: ldb too small");
    PL_CHECK(ldc >= (n > 1 ? n : 1), "pl_gemm: ldc too small");
    if (m == 0 || n == 0) return;
    PL_CHECK(C != NULL && (k == 0 || (A && B)), "pl_gemm: NULL matrix");
    pl_trace_event rec = {.kind = PL_OP_GEMM, .peer = -1, .flops = 2.0 * m * n * (double)k,
                          /* the matrices' bytes, for the cost model's roofline */
                          .bytes = 4u * ((uint64_t)m * k + (uint64_t)k * n + (uint64_t)m * n)};
    gemm_args g = {ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, A, B, C};
    pl_launch(s, &rec, run_gemm, &g, sizeof g);
}

void pl_stream_sync(pl_stream *s) {
    s = pl_stream_resolve(s);
    pl_trace_host_synced(s->id);
    if (pl_streams_deferred()) pl_defer_run(s, s->q_enq);
    if (s->completed != s->issued && g_drain) g_drain(s);
    if (pl_dev->stream_sync) {
        /* On a GPU a deadlocked NCCL call shows up as a stream that never drains. */
        pl_watchdog_arm(s->id ? "comm stream sync" : "compute stream sync", -1);
        pl_dev->stream_sync(s);
        pl_watchdog_disarm();
    }
}

void pl_device_sync(void) {
    if (pl_streams_deferred()) pl_defer_run(NULL, 0);
    pl_stream_sync(&g_comm);
    pl_stream_sync(&g_compute);
}

/* -- events ---------------------------------------------------------------------------- */
pl_event *pl_event_create(void) {
    pl_event *e = calloc(1, sizeof *e);
    PL_CHECK(e != NULL, "out of host memory");
    e->t = -1;
    if (pl_dev->event_create) pl_dev->event_create(e);
    return e;
}

void pl_event_destroy(pl_event *e) {
    if (!e) return;
    if (pl_dev->event_destroy) pl_dev->event_destroy(e);
    free(e);
}

void pl_event_record(pl_event *e, pl_stream *s) {
    s = pl_stream_resolve(s);
    e->stream = s;
    e->trace_pos = pl_trace_stream_pos(s->id);
    e->recorded = true;
    e->deferred = pl_streams_deferred();
    if (e->deferred) {
        e->seq = s->q_enq;
        e->t = s->q_done >= e->seq ? pl_trace_clock() : -1;
        return;
    }
    e->seq = s->issued;
    e->t = s->completed >= e->seq ? pl_trace_clock() : -1;
    if (pl_dev->event_record) pl_dev->event_record(e, s);
}

/* Deferred: the host asking is a wait (the queue moves only when waited for); the time is
 * when the host saw the stream past the event. */
static bool deferred_event_done(pl_event *e) {
    if (e->stream->q_done < e->seq) pl_defer_run(e->stream, e->seq);
    if (e->t < 0) e->t = e->stream->q_done_at;
    return true;
}

bool pl_event_done(pl_event *e) {
    PL_CHECK(e->recorded, "pl_event_done on an event never recorded");
    if (e->deferred) return deferred_event_done(e);
    if (pl_dev->event_query) return pl_dev->event_query(e);
    if (e->stream->completed >= e->seq) {
        if (e->t < 0) e->t = e->stream->completed_at;
        return true;
    }
    return false;
}

void pl_event_sync(pl_event *e) {
    PL_CHECK(e->recorded, "pl_event_sync on an event never recorded");
    pl_trace_stream_waits(!e->stream->id, e->trace_pos); /* the host saw it: so does the other stream */
    if (e->deferred) {
        deferred_event_done(e);
        return;
    }
    if (pl_dev->event_query) {
        pl_dev->stream_sync(e->stream); /* conservative: cuda event sync == stream position */
        return;
    }
    if (e->stream->completed < e->seq && g_drain) g_drain(e->stream);
    pl_event_done(e);
}

void pl_stream_wait_event(pl_stream *s, pl_event *e) {
    PL_CHECK(e->recorded, "pl_stream_wait_event on an event never recorded");
    s = pl_stream_resolve(s);
    pl_trace_stream_waits(s->id, e->trace_pos);
    if (e->deferred) {
        pl_defer_wait(s, e->stream, e->seq);
        return;
    }
    if (pl_dev->stream_wait_event) {
        pl_dev->stream_wait_event(s, e);
        return;
    }
    /* cpu: the waiting stream's next work runs on this thread, so complete e now. */
    pl_event_sync(e);
}

float pl_event_elapsed_ms(pl_event *a, pl_event *b) {
    PL_CHECK(pl_event_done(a) && pl_event_done(b), "pl_event_elapsed_ms on incomplete events");
    if (pl_dev->event_elapsed_ms && !a->deferred) return pl_dev->event_elapsed_ms(a, b);
    return (float)((b->t - a->t) * 1e3);
}

/* -- tensors --------------------------------------------------------------------------- */
#include "pl_tensor.h"

void pl_tensor_download(float *host, pl_tensor t) {
    if (pl_tensor_contiguous(t)) {
        pl_download(host, t.data, (size_t)(t.rows * t.cols) * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < t.rows; r++)
        pl_download(host + r * t.cols, t.data + r * t.ld, (size_t)t.cols * sizeof(float));
}

void pl_tensor_upload(pl_tensor t, const float *host) {
    if (pl_tensor_contiguous(t)) {
        pl_upload(t.data, host, (size_t)(t.rows * t.cols) * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < t.rows; r++)
        pl_upload(t.data + r * t.ld, host + r * t.cols, (size_t)t.cols * sizeof(float));
}

/* ======================================================================================== */
/* The deferred streams (pl_defer.h)                                                        */
/* ======================================================================================== */

/* One piece of queued work: device work (run) or communication (comm). */
typedef struct pl_work {
    struct pl_work *next;
    pl_work_fn run;           /* device work, or NULL                                 */
    const pl_comm_work *comm; /* communication, or NULL; both NULL: an event wait   */
    uint64_t issue;           /* global issue number: the policy's key                */
    uint64_t pos;             /* position on its stream, from 1                       */
    int dep_stream;           /* -1, or the stream that must first reach dep_pos      */
    uint64_t dep_pos;
    pl_order *order[PL_DEFER_MAX_ORDERS];
    uint64_t ticket[PL_DEFER_MAX_ORDERS];
    int norders;
    size_t trace;             /* device work: its record, timed when it runs          */
    bool posted;              /* communication: started, not yet committed            */
    max_align_t args[];
} pl_work;

static bool g_deferred, g_running;
static uint64_t g_issue;

static pl_stream *stream_of(int id) { return id ? pl_stream_comm() : pl_stream_compute(); }

bool pl_streams_deferred(void) { return g_deferred; }

bool pl_streams_set_deferred(bool on) {
    if (on && pl_info()->device != PL_DEVICE_CPU) return false;
    if (on == g_deferred) return true;
    pl_device_sync(); /* what is pending runs under the mode it was issued in */
    g_deferred = on;
    /* Deferred, the backend sees communication only from the loop below, which must
     * never block in it: every stream is asynchronous. */
    pl_stream_compute()->async = on;
    pl_stream_comm()->async = true;
    return true;
}

static pl_work *new_work(size_t size) {
    pl_work *w = calloc(1, sizeof *w + size);
    PL_CHECK(w != NULL, "out of host memory for deferred work");
    w->dep_stream = -1;
    w->trace = (size_t)-1;
    return w;
}

static void enqueue(pl_stream *s, pl_work *w) {
    w->issue = ++g_issue;
    w->pos = ++s->q_enq;
    if (s->q_tail) s->q_tail->next = w;
    else s->q_head = w;
    s->q_tail = w;
}

static void pop(pl_stream *s, pl_work *w) {
    s->q_head = w->next;
    if (!s->q_head) s->q_tail = NULL;
    s->q_done = w->pos;
    s->q_done_at = pl_trace_clock();
    free(w);
    pl_progress_tick();
}

uint64_t pl_defer_tail(const pl_stream *s) { return s->q_enq; }

/* -- issuing -------------------------------------------------------------------------- */
void pl_launch(pl_stream *s, const pl_trace_event *rec, pl_work_fn fn, const void *args,
               size_t size) {
    s = pl_stream_resolve(s);
    pl_trace_event e = *rec;
    e.stream = s->id;
    e.t_start = pl_trace_clock();
    e.t_end = -1;
    size_t tr = pl_trace_record_open(&e);
    if (!g_deferred) {
        pl_stream_ready(s);
        double t0 = pl_trace_clock();
        pl_progress_busy(1);
        fn((void *)args, s);
        pl_progress_busy(0);
        pl_trace_retime(tr, t0, pl_trace_clock());
        return;
    }
    pl_work *w = new_work(size);
    if (size) memcpy(w->args, args, size);
    w->run = fn;
    w->trace = tr;
    enqueue(s, w);
}

void pl_defer_comm(pl_stream *s, const pl_comm_work *ops, const void *args, size_t size,
                   pl_order *const *orders, int norders) {
    PL_CHECK(g_deferred, "pl_defer_comm on eager streams");
    PL_CHECK(norders >= 0 && norders <= PL_DEFER_MAX_ORDERS, "too many communicators in one group");
    s = pl_stream_resolve(s);
    pl_work *w = new_work(size);
    if (size) memcpy(w->args, args, size);
    w->comm = ops;
    w->norders = norders;
    for (int i = 0; i < norders; i++) {
        w->order[i] = orders[i];
        w->ticket[i] = orders[i]->issued++;
    }
    enqueue(s, w);
}

void pl_defer_wait(pl_stream *waiter, pl_stream *on, uint64_t pos) {
    waiter = pl_stream_resolve(waiter);
    on = pl_stream_resolve(on);
    if (waiter == on || on->q_done >= pos) return;
    pl_work *w = new_work(0);
    w->dep_stream = on->id;
    w->dep_pos = pos;
    enqueue(waiter, w);
}

/* -- running --------------------------------------------------------------------------- */
static bool may_start(const pl_work *w) {
    if (w->dep_stream >= 0 && stream_of(w->dep_stream)->q_done < w->dep_pos) return false;
    for (int i = 0; i < w->norders; i++)
        if (w->order[i]->posted != w->ticket[i]) return false;
    return true;
}

/* What a target needs: its stream's work up to pos, and whatever that waits for. */
static void close_need(uint64_t need[2]) {
    for (bool grew = true; grew;) {
        grew = false;
        for (int i = 0; i < 2; i++)
            for (pl_work *w = stream_of(i)->q_head; w && w->pos <= need[i]; w = w->next)
                if (w->dep_stream >= 0 && w->dep_pos > need[w->dep_stream]) {
                    need[w->dep_stream] = w->dep_pos;
                    grew = true;
                }
    }
}

/* Nothing could run beside w until it completes: the other stream is empty, or its next
 * work waits for this stream to get past w. (Not when it waits only for its turn on a
 * communicator: that turn comes when w starts, and a peer may need both in flight.) */
static bool alone(const pl_stream *s, const pl_work *w) {
    const pl_work *o = stream_of(!s->id)->q_head;
    return !o || (!o->posted && o->dep_stream == s->id && o->dep_pos >= w->pos);
}

static void start(pl_stream *s, pl_work *w) {
    if (w->comm && alone(s, w)) {
        /* it may as well block: the same outcome, at the speed of MPI's blocking calls */
        for (int i = 0; i < w->norders; i++) w->order[i]->posted++;
        w->comm->run(w->args, s);
        pop(s, w);
        return;
    }
    if (w->comm) {
        w->posted = true;
        for (int i = 0; i < w->norders; i++) w->order[i]->posted++;
        w->comm->post(w->args, s);
        pl_progress_tick();
        return;
    }
    if (w->run) {
        double t0 = pl_trace_clock();
        pl_progress_busy(1);
        w->run(w->args, s);
        pl_progress_busy(0);
        pl_trace_retime(w->trace, t0, pl_trace_clock());
    }
    pop(s, w);
}

/* Commit one started communication that has completed, the later issued first. */
static bool commit_one(void) {
    pl_work *h[2] = {stream_of(0)->q_head, stream_of(1)->q_head};
    int first = (h[0] && h[1] && h[0]->issue > h[1]->issue) ? 0 : 1;
    for (int k = 0; k < 2; k++) {
        int i = k ? !first : first;
        pl_work *w = h[i];
        if (!w || !w->posted || !w->comm->test(w->args, stream_of(i))) continue;
        w->comm->commit(w->args, stream_of(i));
        pop(stream_of(i), w);
        return true;
    }
    return false;
}

static void arm_for(void) {
    for (int i = 0; i < 2; i++) {
        pl_work *w = stream_of(i)->q_head;
        if (w && w->posted) {
            pl_watchdog_arm(w->comm->name, w->comm->peer ? w->comm->peer(w->args) : -1);
            return;
        }
    }
}

void pl_defer_run(pl_stream *t, uint64_t pos) {
    if (!g_deferred) return;
    PL_CHECK(!g_running, "deferred streams: a wait inside deferred work");
    g_running = true;
    pl_stream *sv[2] = {stream_of(0), stream_of(1)};
    uint64_t need[2] = {sv[0]->q_enq, sv[1]->q_enq};
    bool all = t == NULL;
    if (!all) {
        t = pl_stream_resolve(t);
        need[0] = sv[0]->q_done;
        need[1] = sv[1]->q_done;
        need[t->id] = pos < t->q_enq ? pos : t->q_enq;
        close_need(need);
    }
    size_t spins = 0;
    bool armed = false;
    for (;;) {
        if (all ? !sv[0]->q_head && !sv[1]->q_head : t->q_done >= need[t->id]) break;
        pl_work *best = NULL;
        int bi = 0;
        for (int i = 0; i < 2; i++) {
            pl_work *w = sv[i]->q_head;
            if (w && w->pos <= need[i] && !w->posted && may_start(w) && (!best || w->issue > best->issue)) {
                best = w;
                bi = i;
            }
        }
        if (best) {
            start(sv[bi], best);
            continue;
        }
        bool inflight = (sv[0]->q_head && sv[0]->q_head->posted) || (sv[1]->q_head && sv[1]->q_head->posted);
        if (!all) {
            /* Waiting on communication (or on an earlier operation of a communicator):
             * everything pending may be what a peer waits for, so all of it runs. */
            all = true;
            need[0] = sv[0]->q_enq;
            need[1] = sv[1]->q_enq;
            continue;
        }
        PL_CHECK(inflight, "deferred streams: pending work that can never run");
        if (commit_one()) {
            if (armed) pl_watchdog_disarm();
            armed = false;
            spins = 0;
            continue;
        }
        if (!armed) arm_for();
        armed = true;
        pl_watchdog_poll();
        if (++spins > 16) sched_yield(); /* ranks usually outnumber cores: let peers run */
    }
    if (armed) pl_watchdog_disarm();
    g_running = false;
}
