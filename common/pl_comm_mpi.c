/* pl_comm_mpi.c - the mpi comm backend.
 *
 * Point-to-point uses synchronous-mode sends (MPI_Issend): a send completes only once the
 * receiver has posted the matching receive, as in NCCL, so a program that would deadlock
 * on NCCL deadlocks here too instead of passing by luck of eager buffering.
 * Every wait polls with the watchdog armed. Collectives issued on the comm stream of the
 * cpu device stay in flight (MPI non-blocking collectives) until the stream is drained, so
 * communication really overlaps computation. On the cuda device, buffers are staged
 * through host memory and every operation completes before it returns.
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"  // defines: pl_comm_backend, struct pl_comm, struct pl_stream
#include "pl_internal.h" // defines: pl_trace_close, pl_wire_p2p, pl_wire_coll


/* One MPI request in flight and what to do when it completes. */
typedef struct {
    MPI_Request req;
    const char *op;
    int peer;
    float *upload_to;     /* cuda: device destination of the staged result     */
    float *stage;         /* host staging buffer to free at the end            */
    float *scratch;       /* host scratch copy to free at the end              */
    const float *result;  /* host result to upload (inside stage)              */
    size_t result_bytes;
    float *scale_buf;     /* PL_AVG: divide these elements by scale_div        */
    size_t scale_n;
    float scale_div;
    uint16_t *bf16_scale_buf; /* PL_AVG on bf16 words: the same, rounded back     */
    size_t trace_event;   /* event to close on completion, or (size_t)-1       */
} pending;

typedef struct {
    pending *v;
    size_t n, cap;
} pending_list;

static pending_list g_group;      /* posted inside the open group                      */
static pending_list g_stream_q[2]; /* async collectives per stream (cpu device only)   */

static int on_cuda(void) { return pl_device_in_use() == PL_DEVICE_CUDA; }
/* Collectives on s stay in flight (cpu device: the comm stream; every stream when the
 * streams are deferred, pl_device.c), completed by drain or test. */
static int is_async(const pl_stream *s) { return !on_cuda() && s->async; }

static pending *push(pending_list *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        PL_CHECK(l->v != NULL, "out of host memory");
    }
    pending *p = &l->v[l->n++];
    memset(p, 0, sizeof *p);
    p->req = MPI_REQUEST_NULL;
    p->trace_event = (size_t)-1;
    return p;
}

static void finish(pending *p) {
    if (p->scale_buf) {
        for (size_t i = 0; i < p->scale_n; i++) p->scale_buf[i] /= p->scale_div;
    }
    if (p->bf16_scale_buf) {
        for (size_t i = 0; i < p->scale_n; i++)
            p->bf16_scale_buf[i] = pl_bf16_from_float(pl_bf16_to_float(p->bf16_scale_buf[i]) / p->scale_div);
    }
    if (p->upload_to && p->result_bytes) pl_dev->upload(p->upload_to, p->result, p->result_bytes);
    free(p->stage);
    free(p->scratch);
    p->stage = p->scratch = NULL;
    if (p->trace_event != (size_t)-1) pl_trace_close_now(p->trace_event);
}

/* An MPI error out of a test: explained on one line, the job aborted. */
static void fail_testing(int rc, const MPI_Status *statuses, int outcount, const char *op) {
    /* The usual cause: a send and its receive disagree on the count. */
    int err = rc;
    for (int j = 0; rc == MPI_ERR_IN_STATUS && j < outcount; j++)
        if (statuses[j].MPI_ERROR != MPI_SUCCESS) err = statuses[j].MPI_ERROR;
    int cls = err;
    MPI_Error_class(err, &cls);
    char why[256];
    snprintf(why, sizeof why, "%s%s", pl_mpi_error_string(err),
             cls == MPI_ERR_TRUNCATE ? " (a send and its matching recv must have the same count)" : "");
    pl_fatal(__FILE__, __LINE__, op, why);
}

/* Finish every request in l if all have completed; never blocks. */
static int test_list(pending_list *l) {
    size_t n = l->n;
    if (n == 0) return 1;
    MPI_Request *reqs = malloc(n * sizeof *reqs);
    MPI_Status *statuses = malloc(n * sizeof *statuses);
    PL_CHECK(reqs && statuses, "out of host memory");
    for (size_t i = 0; i < n; i++) reqs[i] = l->v[i].req;
    int done = 0;
    int rc = MPI_Testall((int)n, reqs, &done, statuses);
    if (rc != MPI_SUCCESS) fail_testing(rc, statuses, (int)n, l->v[0].op);
    /* Testall frees the requests only when all are done; keep the handles either way. */
    for (size_t i = 0; i < n; i++) l->v[i].req = reqs[i];
    free(reqs);
    free(statuses);
    if (!done) return 0;
    for (size_t i = 0; i < n; i++) finish(&l->v[i]);
    l->n = 0;
    pl_progress_tick();
    return 1;
}

/* Wait for every request in l, oldest first in the watchdog's report. */
static void wait_list(pending_list *l) {
    size_t n = l->n;
    if (n == 0) return;
    /* Blocking calls leave null requests: nothing to wait for, only the finishing. */
    size_t live = 0;
    for (size_t i = 0; i < n; i++) live += l->v[i].req != MPI_REQUEST_NULL;
    if (live == 0) {
        for (size_t i = 0; i < n; i++) finish(&l->v[i]);
        l->n = 0;
        return;
    }
    MPI_Request *reqs = malloc(n * sizeof *reqs);
    int *idx = malloc(n * sizeof *idx);
    char *done = calloc(n, 1);
    MPI_Status *statuses = malloc(n * sizeof *statuses);
    PL_CHECK(reqs && idx && done && statuses, "out of host memory");
    for (size_t i = 0; i < n; i++) reqs[i] = l->v[i].req;
    size_t remaining = n, first = 0, spins = 0;
    for (size_t i = 0; i < n; i++)
        if (reqs[i] == MPI_REQUEST_NULL) { done[i] = 1; remaining--; }
    while (first < n && done[first]) first++;
    if (remaining) pl_watchdog_arm(l->v[first].op, l->v[first].peer);
    while (remaining) {
        int outcount = 0;
        int rc = MPI_Testsome((int)n, reqs, &outcount, idx, statuses);
        if (rc != MPI_SUCCESS) fail_testing(rc, statuses, outcount, l->v[first].op);
        if (outcount == MPI_UNDEFINED) break;
        for (int j = 0; j < outcount; j++) {
            done[idx[j]] = 1;
            remaining--;
        }
        if (outcount > 0) {
            pl_progress_tick();
            while (first < n && done[first]) first++;
            if (first < n) pl_watchdog_arm(l->v[first].op, l->v[first].peer);
            continue;
        }
        pl_watchdog_poll();
        /* Ranks usually outnumber cores in these labs: let the peer run. */
        if (++spins > 16) sched_yield();
    }
    pl_watchdog_disarm();
    for (size_t i = 0; i < n; i++) finish(&l->v[i]);
    l->n = 0;
    free(reqs);
    free(idx);
    free(done);
    free(statuses);
}

/* -- staging ----------------------------------------------------------------------------- */
/* A host view of a device buffer for reading. cpu: the buffer itself. */
static const float *host_in(const float *dev, size_t n, pending *p) {
    if (!on_cuda() || n == 0) return dev;
    float *h = malloc(n * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory for staging");
    pl_dev->download(h, dev, n * sizeof *h);
    p->stage = h;
    return h;
}

/* -- lifecycle ---------------------------------------------------------------------------- */
static void mpi_init(pl_comm *world) { (void)world; }

static MPI_Op g_bf16_sum = MPI_OP_NULL;

static void mpi_finalize(void) {
    wait_list(&g_group);
    wait_list(&g_stream_q[0]);
    wait_list(&g_stream_q[1]);
    free(g_group.v);
    free(g_stream_q[0].v);
    free(g_stream_q[1].v);
    memset(&g_group, 0, sizeof g_group);
    memset(g_stream_q, 0, sizeof g_stream_q);
    if (g_bf16_sum != MPI_OP_NULL) MPI_Op_free(&g_bf16_sum);
}

static void mpi_group_start(void) {}

static void mpi_group_end(void) { wait_list(&g_group); }

#define PL_P2P_TAG 7

static void mpi_send(const float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    if (on_cuda()) pl_dev->stream_sync(s);
    pending *p = push(&g_group);
    p->op = "send";
    p->peer = peer;
    pl_wire_p2p(1, count * sizeof(float));
    const float *h = host_in(buf, count, p);
    PL_MPI_CHECK(MPI_Issend(h, (int)count, MPI_FLOAT, peer, PL_P2P_TAG, (MPI_Comm)c->mpi, &p->req));
}

static void mpi_recv(float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    if (on_cuda()) pl_dev->stream_sync(s);
    pending *p = push(&g_group);
    p->op = "recv";
    p->peer = peer;
    pl_wire_p2p(0, count * sizeof(float));
    float *h = buf;
    if (on_cuda()) {
        h = malloc(count * sizeof *h);
        PL_CHECK(h != NULL, "out of host memory for staging");
        p->stage = h;
        p->upload_to = buf;
        p->result = h;
        p->result_bytes = count * sizeof *h;
    }
    PL_MPI_CHECK(MPI_Irecv(h, (int)count, MPI_FLOAT, peer, PL_P2P_TAG, (MPI_Comm)c->mpi, &p->req));
}

/* -- collectives ---------------------------------------------------------------------------
 * Each collective gets host pointers for its input and output. On cpu those are the
 * buffers themselves; on cuda one host buffer holds a copy of the output region, with the
 * input copied beside it, and is uploaded back on completion. */
typedef struct {
    const float *in;
    float *out;
    pending *p;
} host_pair;

static host_pair stage_pair(const char *op, const float *sb, size_t in_n, float *rb, size_t out_n,
                            int out_needs_contents, pl_stream *s) {
    pending_list *l = is_async(s) ? &g_stream_q[s->id] : &g_group;
    pending *p = push(l);
    p->op = op;
    p->peer = -1;
    p->trace_event = pl_comm_current_event;
    host_pair hp = {sb, rb, p};
    if (!on_cuda()) return hp;
    pl_dev->stream_sync(s);
    float *h = malloc((in_n + out_n + 1) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory for staging");
    p->stage = h;
    float *hin = h, *hout = h + in_n;
    if (in_n) pl_dev->download(hin, sb, in_n * sizeof *h);
    if (out_needs_contents && out_n) pl_dev->download(hout, rb, out_n * sizeof *h);
    /* The input, when staged, has its own host copy: MPI gets disjoint buffers even for
     * in-place calls (callers pass in_n = 0 and point h.in into h.out where MPI_IN_PLACE
     * applies). */
    hp.in = hin;
    hp.out = hout;
    p->upload_to = rb;
    p->result = hout;
    p->result_bytes = out_n * sizeof *h;
    return hp;
}

/* Complete now, or leave in flight on the cpu comm stream. */
static void issue(pl_stream *s) {
    if (is_async(s)) {
        s->issued++;
        return;
    }
    wait_list(&g_group);
}

/* Synchronous collectives use MPI's blocking calls (its tuned algorithms; the watchdog
 * thread covers them); asynchronous ones the non-blocking calls. */
static int is_sync(pl_stream *s) { return !is_async(s); }

#define COLL_CALL(s, name, blocking, nonblocking)   \
    do {                                            \
        if (is_sync(s)) {                           \
            pl_watchdog_arm(name, -1);              \
            PL_MPI_CHECK(blocking);                 \
            pl_watchdog_disarm();                   \
        } else {                                    \
            PL_MPI_CHECK(nonblocking);              \
        }                                           \
    } while (0)

static MPI_Op mpi_op(pl_op op) { return op == PL_MAX ? MPI_MAX : MPI_SUM; }

static void set_avg(pending *p, pl_op op, float *buf, size_t n, int size) {
    if (op != PL_AVG) return;
    p->scale_buf = buf;
    p->scale_n = n;
    p->scale_div = (float)size;
}

/* Temporary host copy for MPI calls that cannot take aliased buffers. */
static const float *scratch_copy(pending *p, const float *src, size_t n) {
    float *t = malloc((n + 1) * sizeof *t);
    PL_CHECK(t != NULL, "out of host memory");
    memcpy(t, src, n * sizeof *t);
    p->scratch = t;
    return t;
}

static void mpi_allreduce(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * sizeof(float));
    host_pair h = stage_pair("allreduce", sb, sb == rb ? 0 : n, rb, n, sb == rb, s);
    if (sb == rb) h.in = h.out;
    const void *in = h.in == h.out ? MPI_IN_PLACE : (const void *)h.in;
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "allreduce", MPI_Allreduce(in, h.out, (int)n, MPI_FLOAT, mpi_op(op), mc),
              MPI_Iallreduce(in, h.out, (int)n, MPI_FLOAT, mpi_op(op), mc, &h.p->req));
    set_avg(h.p, op, h.out, n, c->size);
    issue(s);
}

static void mpi_allgather(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * sizeof(float));
    size_t total = n * (size_t)c->size;
    int in_place = sb == rb + (size_t)c->rank * n;
    host_pair h = stage_pair("allgather", sb, in_place ? 0 : n, rb, total, in_place, s);
    if (in_place) h.in = h.out + (size_t)c->rank * n;
    const void *in = in_place ? MPI_IN_PLACE : (const void *)h.in;
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "allgather", MPI_Allgather(in, (int)n, MPI_FLOAT, h.out, (int)n, MPI_FLOAT, mc),
              MPI_Iallgather(in, (int)n, MPI_FLOAT, h.out, (int)n, MPI_FLOAT, mc, &h.p->req));
    issue(s);
}

static void mpi_reduce_scatter(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c,
                               pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * sizeof(float));
    size_t total = n * (size_t)c->size;
    host_pair h = stage_pair("reduce_scatter", sb, total, rb, n, 0, s);
    /* MPI needs disjoint buffers; NCCL's in-place form has rb inside sb. */
    const float *in = h.in;
    if (!on_cuda() && rb >= sb && rb < sb + total) in = scratch_copy(h.p, h.in, total);
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "reduce_scatter", MPI_Reduce_scatter_block(in, h.out, (int)n, MPI_FLOAT, mpi_op(op), mc),
              MPI_Ireduce_scatter_block(in, h.out, (int)n, MPI_FLOAT, mpi_op(op), mc, &h.p->req));
    set_avg(h.p, op, h.out, n, c->size);
    issue(s);
}

static void mpi_broadcast(const float *sb, float *rb, size_t n, int root, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * sizeof(float));
    int is_root = c->rank == root;
    host_pair h = stage_pair("broadcast", is_root && sb != rb ? sb : rb, is_root && sb != rb ? n : 0,
                             rb, n, is_root && sb == rb, s);
    if (is_root && sb != rb && n) memcpy(h.out, h.in, n * sizeof(float));
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "broadcast", MPI_Bcast(h.out, (int)n, MPI_FLOAT, root, mc),
              MPI_Ibcast(h.out, (int)n, MPI_FLOAT, root, mc, &h.p->req));
    issue(s);
}

static void mpi_reduce(const float *sb, float *rb, size_t n, pl_op op, int root, pl_comm *c,
                       pl_stream *s) {
    pl_wire_coll(n * sizeof(float));
    int is_root = c->rank == root;
    host_pair h = stage_pair("reduce", sb, (is_root && sb == rb) ? 0 : n, is_root ? rb : NULL,
                             is_root ? n : 0, is_root && sb == rb, s);
    if (is_root && sb == rb) h.in = h.out;
    const void *in = (is_root && h.in == h.out) ? MPI_IN_PLACE : (const void *)h.in;
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "reduce", MPI_Reduce(in, h.out, (int)n, MPI_FLOAT, mpi_op(op), root, mc),
              MPI_Ireduce(in, h.out, (int)n, MPI_FLOAT, mpi_op(op), root, mc, &h.p->req));
    if (is_root) set_avg(h.p, op, h.out, n, c->size);
    issue(s);
}

static void mpi_alltoall(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * sizeof(float));
    size_t total = n * (size_t)c->size;
    host_pair h = stage_pair("alltoall", sb, sb == rb ? 0 : total, rb, total, sb == rb, s);
    const float *in = h.in;
    if (sb == rb) in = scratch_copy(h.p, h.out, total);
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "alltoall", MPI_Alltoall(in, (int)n, MPI_FLOAT, h.out, (int)n, MPI_FLOAT, mc),
              MPI_Ialltoall(in, (int)n, MPI_FLOAT, h.out, (int)n, MPI_FLOAT, mc, &h.p->req));
    issue(s);
}

/* -- bfloat16 ------------------------------------------------------------------------------
 * 16-bit words travel as MPI_UINT16_T; a sum widens both operands, adds in float32 and
 * rounds once per combination (MPI's algorithm decides the order, as NCCL's does). Staging
 * on the cuda device counts bytes: a bf16 buffer need not be a whole number of floats. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = pl_bf16_from_float(pl_bf16_to_float(a[i]) + pl_bf16_to_float(b[i]));
}

static host_pair stage_bytes(const char *op, const void *sb, size_t in_bytes, void *rb, size_t out_bytes,
                             int out_needs_contents, pl_stream *s) {
    pending_list *l = is_async(s) ? &g_stream_q[s->id] : &g_group;
    pending *p = push(l);
    p->op = op;
    p->peer = -1;
    p->trace_event = pl_comm_current_event;
    host_pair hp = {(const float *)sb, (float *)rb, p};
    if (!on_cuda()) return hp;
    pl_dev->stream_sync(s);
    char *h = malloc(in_bytes + out_bytes + 4);
    PL_CHECK(h != NULL, "out of host memory for staging");
    p->stage = (float *)h;
    if (in_bytes) pl_dev->download(h, sb, in_bytes);
    if (out_needs_contents && out_bytes) pl_dev->download(h + in_bytes, rb, out_bytes);
    hp.in = (const float *)h;
    hp.out = (float *)(h + in_bytes);
    p->upload_to = rb;
    p->result = hp.out;
    p->result_bytes = out_bytes;
    return hp;
}

static void mpi_allgather_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * 2);
    int in_place = sb == rb + (size_t)c->rank * n;
    host_pair h = stage_bytes("allgather", sb, in_place ? 0 : 2 * n, rb, 2 * n * (size_t)c->size, in_place, s);
    const void *in = in_place ? MPI_IN_PLACE : (const void *)h.in;
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "allgather", MPI_Allgather(in, (int)n, MPI_UINT16_T, h.out, (int)n, MPI_UINT16_T, mc),
              MPI_Iallgather(in, (int)n, MPI_UINT16_T, h.out, (int)n, MPI_UINT16_T, mc, &h.p->req));
    issue(s);
}

static void mpi_reduce_scatter_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_op op, pl_comm *c,
                                    pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * 2);
    if (g_bf16_sum == MPI_OP_NULL) PL_MPI_CHECK(MPI_Op_create(bf16_sum, 1, &g_bf16_sum));
    size_t total = n * (size_t)c->size;
    host_pair h = stage_bytes("reduce_scatter", sb, 2 * total, rb, 2 * n, 0, s);
    const void *in = h.in;
    if (!on_cuda() && rb >= sb && rb < sb + total) { /* MPI needs disjoint buffers */
        uint16_t *t = malloc(2 * total + 2);
        PL_CHECK(t != NULL, "out of host memory");
        memcpy(t, sb, 2 * total);
        h.p->scratch = (float *)t;
        in = t;
    }
    MPI_Comm mc = (MPI_Comm)c->mpi;
    COLL_CALL(s, "reduce_scatter", MPI_Reduce_scatter_block(in, h.out, (int)n, MPI_UINT16_T, g_bf16_sum, mc),
              MPI_Ireduce_scatter_block(in, h.out, (int)n, MPI_UINT16_T, g_bf16_sum, mc, &h.p->req));
    if (op == PL_AVG) {
        h.p->bf16_scale_buf = (uint16_t *)h.out;
        h.p->scale_n = n;
        h.p->scale_div = (float)c->size;
    }
    issue(s);
}

static void mpi_drain(pl_stream *s) {
    wait_list(&g_stream_q[s->id]);
    s->completed = s->issued;
    s->completed_at = pl_trace_clock();
}

static bool mpi_test(pl_stream *s) {
    if (!test_list(&g_stream_q[s->id])) return false;
    s->completed = s->issued;
    s->completed_at = pl_trace_clock();
    return true;
}

/* The group's operations join s's in-flight list instead of being waited for. */
static void mpi_group_post(pl_stream *s) {
    pending_list *q = &g_stream_q[s->id];
    for (size_t i = 0; i < g_group.n; i++) *push(q) = g_group.v[i];
    g_group.n = 0;
    s->issued++;
}

const pl_comm_backend pl_comm_mpi = {
    .name = "mpi",
    .init = mpi_init,
    .finalize = mpi_finalize,
    .group_start = mpi_group_start,
    .group_end = mpi_group_end,
    .send = mpi_send,
    .recv = mpi_recv,
    .allreduce = mpi_allreduce,
    .allgather = mpi_allgather,
    .reduce_scatter = mpi_reduce_scatter,
    .broadcast = mpi_broadcast,
    .reduce = mpi_reduce,
    .alltoall = mpi_alltoall,
    .drain = mpi_drain,
    .test = mpi_test,
    .group_post = mpi_group_post,
    .poll = NULL,  /* MPI reports errors from the calls themselves */
    .abort = NULL, /* nothing to tear down: MPI_Abort ends the job  */
    .allgather_bf16 = mpi_allgather_bf16,
    .reduce_scatter_bf16 = mpi_reduce_scatter_bf16,
};
