/* pl_comm_defer.c - communication on deferred streams (comm layer; pl_defer.h).
 *
 * A collective or a group of sends and receives becomes one piece of deferred work. When
 * the queue starts it, its inputs are copied into staging buffers the harness owns (bytes,
 * so the bf16 all-gather and reduce-scatter stage 2-byte words) and the backend posts it on
 * those without blocking (pl_comm_backend's test and group_post); when it has completed,
 * commit copies the outputs into the caller's buffers. So a
 * communication reads its inputs at one instant and writes its outputs at another, and
 * device work run in between (on the other stream, with no wait between them) sees the
 * buffers before or after, never half-way: a missing wait gives the same wrong result on
 * every run. Their trace records span, as on an eager comm stream, from the call that
 * issued them to their completion. */
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"  // defines: pl_cb, struct pl_comm, pl_order
#include "pl_defer.h"    // defines: pl_defer_comm, pl_defer_wait, pl_streams_deferred
#include "pl_internal.h" // defines: pl_trace_retime, pl_trace_close

/* The trace record of the operation pl_comm.c is handing to a backend, (size_t)-1 between
 * them: the backend closes it when the operation completes; never here. */
size_t pl_comm_current_event = (size_t)-1;

/* A host copy of a device region, for the time the operation is in flight. */
static void *stage_bytes(const void *src, size_t bytes, bool copy) {
    void *h = malloc(bytes ? bytes : 1);
    PL_CHECK(h != NULL, "out of host memory for staging");
    if (copy && bytes) memcpy(h, src, bytes);
    return h;
}

/* -- collectives --------------------------------------------------------------------------- */
typedef struct {
    pl_op_kind kind;
    size_t es;      /* bytes per element: 4 (float), or 2 (bf16 all-gather, reduce-scatter) */
    const void *sb;
    void *rb;
    size_t n;
    pl_op op;
    int root;
    pl_comm *c;
    size_t trace;
    /* staging, while in flight: one buffer when input and output overlap (in place) */
    void *stage_in, *stage_out;
    const void *st_sb;
    void *st_rb;
    size_t out_bytes;
} coll_args;

/* The regions a collective reads and writes, in bytes (NULL: none on this rank). */
static void coll_regions(const coll_args *a, const char **in, size_t *in_b, char **out, size_t *out_b) {
    size_t p = (size_t)a->c->size, n = a->n;
    bool root = a->c->rank == a->root;
    *in = a->sb, *in_b = n, *out = a->rb, *out_b = n;
    switch (a->kind) {
    case PL_OP_ALLGATHER: *out_b = n * p; break;
    case PL_OP_REDUCE_SCATTER: *in_b = n * p; break;
    case PL_OP_ALLTOALL: *in_b = *out_b = n * p; break;
    case PL_OP_BROADCAST: if (!root) *in = NULL; break;
    case PL_OP_REDUCE: if (!root) *out = NULL; break;
    default: break;
    }
    *in_b *= a->es, *out_b *= a->es;
    if (!*in || !n) *in = NULL, *in_b = 0;
    if (!*out || !n) *out = NULL, *out_b = 0;
}

/* The backend's call for the collective, on the buffers given. */
static void coll_call(const coll_args *a, const void *sb, void *rb, pl_stream *s) {
    pl_comm_current_event = (size_t)-1;
    if (a->es == 2) {
        if (a->kind == PL_OP_ALLGATHER) pl_cb->allgather_bf16(sb, rb, a->n, a->c, s);
        else if (a->kind == PL_OP_REDUCE_SCATTER) pl_cb->reduce_scatter_bf16(sb, rb, a->n, a->op, a->c, s);
        else PL_CHECK(0, "no such bf16 collective");
        return;
    }
    switch (a->kind) {
    case PL_OP_ALLREDUCE: pl_cb->allreduce(sb, rb, a->n, a->op, a->c, s); break;
    case PL_OP_ALLGATHER: pl_cb->allgather(sb, rb, a->n, a->c, s); break;
    case PL_OP_REDUCE_SCATTER: pl_cb->reduce_scatter(sb, rb, a->n, a->op, a->c, s); break;
    case PL_OP_BROADCAST: pl_cb->broadcast(sb, rb, a->n, a->root, a->c, s); break;
    case PL_OP_REDUCE: pl_cb->reduce(sb, rb, a->n, a->op, a->root, a->c, s); break;
    case PL_OP_ALLTOALL: pl_cb->alltoall(sb, rb, a->n, a->c, s); break;
    default: PL_CHECK(0, "not a collective");
    }
}

static void coll_post(void *p, pl_stream *s) {
    coll_args *a = p;
    const char *in;
    char *out;
    size_t in_b, out_b;
    coll_regions(a, &in, &in_b, &out, &out_b);
    a->out_bytes = out_b;
    a->st_sb = NULL;
    a->st_rb = NULL;
    if (in && out && in < out + out_b && out < in + in_b) {
        /* In place (or overlapping): one staging copy keeps the buffers' relation, which
         * the backend reads to choose MPI_IN_PLACE. */
        const char *lo = in < out ? in : out;
        const char *hi = in + in_b > out + out_b ? in + in_b : out + out_b;
        char *st = a->stage_in = stage_bytes(lo, (size_t)(hi - lo), true);
        a->st_sb = st + (in - lo);
        a->st_rb = st + (out - lo);
    } else {
        if (in) a->st_sb = a->stage_in = stage_bytes(in, in_b, true);
        if (out) a->st_rb = a->stage_out = stage_bytes(out, out_b, false);
    }
    /* A broadcast's non-root send buffer and a reduce's non-root receive buffer are not
     * read; the backend gets what the caller gave. */
    coll_call(a, a->st_sb ? a->st_sb : a->sb, a->st_rb ? a->st_rb : a->rb, s);
}

/* Blocking, on the caller's buffers: the stream is synchronous for the call. */
static void coll_run(void *p, pl_stream *s) {
    coll_args *a = p;
    bool async = s->async;
    s->async = false;
    coll_call(a, a->sb, a->rb, s);
    s->async = async;
    pl_trace_close(a->trace, pl_trace_clock());
}

static bool comm_test(void *p, pl_stream *s) {
    (void)p;
    return pl_cb->test(s);
}

static void coll_commit(void *p, pl_stream *s) {
    (void)s;
    coll_args *a = p;
    if (a->out_bytes) memcpy(a->rb, a->st_rb, a->out_bytes);
    free(a->stage_in);
    free(a->stage_out);
    pl_trace_close(a->trace, pl_trace_clock());
}

static const pl_comm_work coll_work[PL_OP_COUNT] = {
    [PL_OP_ALLREDUCE] = {"allreduce", coll_post, comm_test, coll_commit, NULL, coll_run},
    [PL_OP_ALLGATHER] = {"allgather", coll_post, comm_test, coll_commit, NULL, coll_run},
    [PL_OP_REDUCE_SCATTER] = {"reduce_scatter", coll_post, comm_test, coll_commit, NULL, coll_run},
    [PL_OP_BROADCAST] = {"broadcast", coll_post, comm_test, coll_commit, NULL, coll_run},
    [PL_OP_REDUCE] = {"reduce", coll_post, comm_test, coll_commit, NULL, coll_run},
    [PL_OP_ALLTOALL] = {"alltoall", coll_post, comm_test, coll_commit, NULL, coll_run},
};

bool pl_comm_defer_coll(pl_op_kind kind, const void *sb, void *rb, size_t n, size_t es, pl_op op, int root,
                        pl_comm *c, pl_stream *s, size_t trace) {
    if (!pl_streams_deferred()) return false;
    PL_CHECK(pl_cb->test != NULL, "deferred streams need a comm backend that can test (mpi)");
    PL_CHECK(es == sizeof(float) || (es == 2 && (kind == PL_OP_ALLGATHER || kind == PL_OP_REDUCE_SCATTER)),
             "deferred streams: no such collective");
    coll_args a = {.kind = kind, .es = es, .sb = sb, .rb = rb, .n = n, .op = op, .root = root, .c = c, .trace = trace};
    pl_order *order = &c->order;
    pl_defer_comm(s, &coll_work[kind], &a, sizeof a, &order, 1);
    return true;
}

/* -- groups of sends and receives ----------------------------------------------------------- */
typedef struct {
    bool is_send;
    float *buf;
    size_t count;
    int peer;
    pl_comm *c;
    pl_stream *s;
    size_t trace;
    float *stage;
} p2p_op;

typedef struct {
    p2p_op *ops;
    size_t n;
} group_args;

static p2p_op *g_ops; /* the open group's operations */
static size_t g_n, g_cap;

void pl_comm_defer_p2p(bool is_send, float *buf, size_t count, int peer, pl_comm *c, pl_stream *s,
                       size_t trace) {
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 16;
        g_ops = realloc(g_ops, g_cap * sizeof *g_ops);
        PL_CHECK(g_ops != NULL, "out of host memory");
    }
    g_ops[g_n++] = (p2p_op){is_send, buf, count, peer, c, s, trace, NULL};
}

static void group_post(void *p, pl_stream *s) {
    group_args *g = p;
    if (pl_cb->group_start) pl_cb->group_start();
    for (size_t i = 0; i < g->n; i++) {
        p2p_op *o = &g->ops[i];
        o->stage = stage_bytes(o->buf, o->count * sizeof(float), o->is_send);
        if (o->is_send) pl_cb->send(o->stage, o->count, o->peer, o->c, s);
        else pl_cb->recv(o->stage, o->count, o->peer, o->c, s);
    }
    pl_cb->group_post(s);
}

static void group_commit(void *p, pl_stream *s) {
    (void)s;
    group_args *g = p;
    double t = pl_trace_clock();
    for (size_t i = 0; i < g->n; i++) {
        p2p_op *o = &g->ops[i];
        if (!o->is_send) memcpy(o->buf, o->stage, o->count * sizeof(float));
        free(o->stage);
        pl_trace_close(o->trace, t);
    }
    free(g->ops);
}

static void group_run(void *p, pl_stream *s) {
    group_args *g = p;
    if (pl_cb->group_start) pl_cb->group_start();
    for (size_t i = 0; i < g->n; i++) {
        p2p_op *o = &g->ops[i];
        if (o->is_send) pl_cb->send(o->buf, o->count, o->peer, o->c, s);
        else pl_cb->recv(o->buf, o->count, o->peer, o->c, s);
    }
    if (pl_cb->group_end) pl_cb->group_end();
    double t = pl_trace_clock();
    for (size_t i = 0; i < g->n; i++) pl_trace_close(g->ops[i].trace, t);
    free(g->ops);
}

static int group_peer(const void *p) {
    const group_args *g = p;
    return g->n ? g->ops[0].peer : -1;
}

static const pl_comm_work group_work[2] = {
    {"send", group_post, comm_test, group_commit, group_peer, group_run},
    {"recv", group_post, comm_test, group_commit, group_peer, group_run},
};

/* The outermost group ended: its operations become one piece of work on the stream of
 * the first, which also waits for (and holds back) the other stream when it has some. */
void pl_comm_defer_group_end(void) {
    if (!g_n) return;
    PL_CHECK(pl_cb->group_post != NULL && pl_cb->test != NULL,
             "deferred streams need a comm backend that can post groups (mpi)");
    pl_order *orders[PL_DEFER_MAX_ORDERS];
    int norders = 0;
    pl_stream *s = pl_stream_resolve(g_ops[0].s), *other = NULL;
    for (size_t i = 0; i < g_n; i++) {
        bool seen = false;
        for (int k = 0; k < norders; k++) seen |= orders[k] == &g_ops[i].c->order;
        if (!seen) {
            PL_CHECK(norders < PL_DEFER_MAX_ORDERS, "deferred streams: a group spans more than 4 communicators");
            orders[norders++] = &g_ops[i].c->order;
        }
        if (pl_stream_resolve(g_ops[i].s) != s) other = pl_stream_resolve(g_ops[i].s);
    }
    group_args g = {malloc(g_n * sizeof *g.ops), g_n};
    PL_CHECK(g.ops != NULL, "out of host memory");
    memcpy(g.ops, g_ops, g_n * sizeof *g.ops);
    g_n = 0;
    if (other) pl_defer_wait(s, other, pl_defer_tail(other));
    pl_defer_comm(s, &group_work[!g.ops[0].is_send], &g, sizeof g, orders, norders);
    if (other) pl_defer_wait(other, s, pl_defer_tail(s));
}

void pl_comm_defer_teardown(void) {
    free(g_ops);
    g_ops = NULL;
    g_n = g_cap = 0;
}
