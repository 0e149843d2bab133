/* transport.c - the player's comm backend when its referee moves the messages.
 *
 * In a graded run on the cpu device the player starts no MPI and holds no socket but its
 * control socket: each send, receive, collective, barrier, split and host collective is a
 * request to the referee (REP_XFER), with its operands copied into the arena, and
 * the referee posts it on its own MPI, counts it, and says when it completed
 * (CMD_XFER_DONE). What the referees counted is what the rubric reads; the player's own
 * counters are only its story. The semantics are the mpi backend's (pl_comm_mpi.c): sends
 * are synchronous, a group's operations progress together, collectives on an asynchronous
 * stream stay in flight until the stream is drained or tested.
 *
 * The arena (a memfd the referee maps too) is a bump allocator: operands stay there until
 * their request completes; it starts over whenever nothing is in flight. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"  // defines: pl_comm_backend, struct pl_comm, struct pl_stream
#include "pl_internal.h" // defines: pl_trace_close, pl_wire_p2p, pl_wire_coll
#include "runner.h"
#include "transport.h"

static unsigned char *g_base;  /* the arena, mapped                                       */
static uint64_t g_arena_bytes;
static uint64_t g_arena_used = WIRE_ARENA_HEAD; /* the arena's bytes handed out since it last started over */
static uint64_t g_next_id = 1;
static uint64_t g_in_flight;   /* requests posted and not finished                        */

/* A completion that arrived before its request was waited for. */
typedef struct {
    xfer_done d;
    void *data;
    uint64_t len;
} arrived;
static arrived *g_arrived;
static size_t g_narrived, g_cap_arrived;

typedef struct {
    uint64_t id;
    const char *op;
    int peer;
    bool done;
    void *copy_to;        /* the caller's buffer the result goes to at the end */
    uint64_t out_off, out_bytes;
    pl_op avg_op;         /* PL_AVG: divide by avg_div at the end               */
    int avg_div;
    int dtype;
    size_t trace_event;
} pending;

typedef struct {
    pending *v;
    size_t n, cap;
} pending_list;

static pending_list g_group, g_stream_q[2];

/* The arena's head is the referees' board as the referee copies it: a wait for a message is
 * a wait for the other players, whose progress this player's watchdog sees only there. */
void transport_attach(unsigned char *arena, uint64_t bytes) {
    g_base = arena;
    g_arena_bytes = bytes;
    pl_watchdog_watch_words((const volatile uint64_t *)arena);
}

static int is_async(const pl_stream *s) { return s->async; }

/* The referee numbers communicators itself: requests name its number, kept in backend. */
static int32_t ref_id(const pl_comm *c) { return c->id == 0 ? 0 : (int32_t)(intptr_t)c->backend; }

/* -- the socket ------------------------------------------------------------------------- */
static PL_NORETURN void lost(const char *what) {
    pl_fatal(__FILE__, __LINE__, what, "the referee closed the control socket (it stopped this run)");
}

static uint64_t post(xfer_req *r, const void *inline_bytes, uint64_t len) {
    r->id = g_next_id++;
    size_t n = sizeof *r + (size_t)len;
    unsigned char *msg = malloc(n);
    PL_CHECK(msg != NULL, "out of host memory");
    memcpy(msg, r, sizeof *r);
    if (len) memcpy(msg + sizeof *r, inline_bytes, (size_t)len);
    if (!wire_send(WIRE_FD_CTL, REP_XFER, 0, msg, n)) lost("a transport request");
    free(msg);
    g_in_flight++;
    return r->id;
}

/* Read one completion (blocking up to timeout_ms; -1 forever): false when none came. */
static bool take_one(int timeout_ms) {
    struct pollfd p = {.fd = WIRE_FD_CTL, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) return false;
    if (r <= 0) return false;
    wire_msg m;
    void *payload = NULL;
    int got = wire_recv(WIRE_FD_CTL, &m, &payload, sizeof(xfer_done) + WIRE_XFER_INLINE_MAX + 4096);
    if (got != 1) lost("a transport completion");
    if (m.cmd != CMD_XFER_DONE || m.len < sizeof(xfer_done))
        pl_fatal(__FILE__, __LINE__, "a message from the referee", "not a transport completion while one was awaited");
    if (g_narrived == g_cap_arrived) {
        g_cap_arrived = g_cap_arrived ? 2 * g_cap_arrived : 16;
        g_arrived = realloc(g_arrived, g_cap_arrived * sizeof *g_arrived);
        PL_CHECK(g_arrived != NULL, "out of host memory");
    }
    arrived *a = &g_arrived[g_narrived++];
    memcpy(&a->d, payload, sizeof a->d);
    a->len = m.len - sizeof a->d;
    a->data = NULL;
    if (a->len) {
        a->data = malloc((size_t)a->len);
        PL_CHECK(a->data != NULL, "out of host memory");
        memcpy(a->data, (unsigned char *)payload + sizeof a->d, (size_t)a->len);
    }
    free(payload);
    return true;
}

/* Take request id's completion if it arrived (its result bytes to *data, the caller frees). */
static bool claim(uint64_t id, xfer_done *d, void **data, uint64_t *len) {
    for (size_t i = 0; i < g_narrived; i++) {
        if (g_arrived[i].d.id != id) continue;
        if (d) *d = g_arrived[i].d;
        if (data) *data = g_arrived[i].data;
        else free(g_arrived[i].data);
        if (len) *len = g_arrived[i].len;
        g_arrived[i] = g_arrived[--g_narrived];
        return true;
    }
    return false;
}

/* Wait for one request of the host side (no watchdog verdict: its op names the wait). */
static void wait_one(uint64_t id, const char *op, int peer, xfer_done *d, void **data, uint64_t *len) {
    pl_watchdog_arm(op, peer);
    while (!claim(id, d, data, len)) {
        if (!take_one(20)) pl_watchdog_poll();
    }
    pl_watchdog_disarm();
    g_in_flight--;
    if (g_in_flight == 0) g_arena_used = WIRE_ARENA_HEAD;
}

/* -- the arena -------------------------------------------------------------------------- */
static uint64_t arena_take(uint64_t bytes) {
    uint64_t off = (g_arena_used + 255) / 256 * 256;
    if (off + bytes > g_arena_bytes) {
        char why[160];
        snprintf(why, sizeof why, "more than its %llu MiB of messages in flight at once (wait for some before posting more)",
                 (unsigned long long)(g_arena_bytes >> 20));
        pl_fatal(__FILE__, __LINE__, "the transport's arena", why);
    }
    g_arena_used = off + bytes;
    return off;
}

static void *at(uint64_t off) { return g_base + off; }

/* -- requests in flight ------------------------------------------------------------------ */
static pending *push(pending_list *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        PL_CHECK(l->v != NULL, "out of host memory");
    }
    pending *p = &l->v[l->n++];
    memset(p, 0, sizeof *p);
    p->trace_event = (size_t)-1;
    return p;
}

static void finish(pending *p) {
    if (p->copy_to && p->out_bytes) {
        memcpy(p->copy_to, at(p->out_off), (size_t)p->out_bytes);
        if (p->avg_op == PL_AVG && p->dtype == XFER_F32) {
            float *f = p->copy_to;
            for (size_t i = 0; i < p->out_bytes / 4; i++) f[i] /= (float)p->avg_div;
        } else if (p->avg_op == PL_AVG) {
            uint16_t *h = p->copy_to;
            for (size_t i = 0; i < p->out_bytes / 2; i++)
                h[i] = pl_bf16_from_float(pl_bf16_to_float(h[i]) / (float)p->avg_div);
        }
    }
    if (p->trace_event != (size_t)-1) pl_trace_close_now(p->trace_event);
    g_in_flight--;
}

/* Mark what has arrived; true when every request of l is done. */
static bool sweep(pending_list *l) {
    bool all = true;
    for (size_t i = 0; i < l->n; i++) {
        xfer_done d;
        if (!l->v[i].done && claim(l->v[i].id, &d, NULL, NULL)) {
            if (d.a == 2) pl_fatal(__FILE__, __LINE__, l->v[i].op, "message truncated (a send and its matching recv must have the same count)");
            if (d.a) pl_fatal(__FILE__, __LINE__, l->v[i].op, "the referees' MPI failed to move it");
            l->v[i].done = true;
            pl_progress_tick();
        }
        all &= l->v[i].done;
    }
    return all;
}

static void finish_list(pending_list *l) {
    for (size_t i = 0; i < l->n; i++) finish(&l->v[i]);
    l->n = 0;
    if (g_in_flight == 0) g_arena_used = WIRE_ARENA_HEAD;
}

static bool test_list(pending_list *l) {
    if (l->n == 0) return true;
    while (take_one(0)) {
    }
    if (!sweep(l)) return false;
    finish_list(l);
    return true;
}

static void wait_list(pending_list *l) {
    if (l->n == 0) return;
    size_t first = 0;
    pl_watchdog_arm(l->v[0].op, l->v[0].peer);
    while (!sweep(l)) {
        size_t f = 0;
        while (f < l->n && l->v[f].done) f++;
        if (f != first) {
            first = f;
            pl_watchdog_arm(l->v[f].op, l->v[f].peer);
        }
        if (!take_one(20)) pl_watchdog_poll();
    }
    pl_watchdog_disarm();
    finish_list(l);
}

/* -- point-to-point -------------------------------------------------------------------- */
static void ref_group_end(void) { wait_list(&g_group); }

static void ref_send(const float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    (void)s;
    pl_wire_p2p(1, count * sizeof(float));
    xfer_req r = {.kind = XFER_SEND, .dtype = XFER_F32, .comm = ref_id(c), .peer = peer, .count = count};
    r.in_off = arena_take(count * sizeof(float));
    memcpy(at(r.in_off), buf, count * sizeof(float));
    pending *p = push(&g_group);
    p->op = "send";
    p->peer = peer;
    p->id = post(&r, NULL, 0);
}

static void ref_recv(float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    (void)s;
    pl_wire_p2p(0, count * sizeof(float));
    xfer_req r = {.kind = XFER_RECV, .dtype = XFER_F32, .comm = ref_id(c), .peer = peer, .count = count};
    r.out_off = arena_take(count * sizeof(float));
    pending *p = push(&g_group);
    p->op = "recv";
    p->peer = peer;
    p->copy_to = buf;
    p->out_off = r.out_off;
    p->out_bytes = count * sizeof(float);
    p->id = post(&r, NULL, 0);
}

/* -- collectives ------------------------------------------------------------------------
 * Every collective gets disjoint operands in the arena: the input copied in (in_bytes), the
 * output room (out_bytes, with the caller's current contents where the result keeps some:
 * a broadcast's root). The result goes back to the caller's buffer when it completes. */
static void coll(uint32_t kind, const char *name, int dtype, size_t es, const void *sb, size_t in_n, void *rb,
                 size_t out_n, size_t n, pl_op op, int root, pl_comm *c, pl_stream *s) {
    pl_wire_coll((kind == XFER_ALLREDUCE || kind == XFER_BROADCAST || kind == XFER_REDUCE ? n : n * (size_t)c->size) * es);
    xfer_req r = {.kind = kind, .dtype = (uint32_t)dtype, .comm = ref_id(c), .peer = root, .op = (int32_t)op, .count = n};
    r.in_off = arena_take(in_n * es);
    if (in_n) memcpy(at(r.in_off), sb, in_n * es);
    r.out_off = arena_take(out_n * es);
    pending_list *l = is_async(s) ? &g_stream_q[s->id] : &g_group;
    pending *p = push(l);
    p->op = name;
    p->peer = -1;
    p->trace_event = pl_comm_current_event;
    p->copy_to = out_n ? rb : NULL;
    p->out_off = r.out_off;
    p->out_bytes = out_n * es;
    p->dtype = dtype;
    p->avg_op = op;
    p->avg_div = c->size;
    p->id = post(&r, NULL, 0);
    if (is_async(s)) s->issued++;
    else wait_list(&g_group);
}

static void ref_allreduce(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    coll(XFER_ALLREDUCE, "allreduce", XFER_F32, 4, sb, n, rb, n, n, op, -1, c, s);
}

static void ref_allgather(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    coll(XFER_ALLGATHER, "allgather", XFER_F32, 4, sb, n, rb, n * (size_t)c->size, n, PL_SUM, -1, c, s);
}

static void ref_reduce_scatter(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    coll(XFER_REDUCE_SCATTER, "reduce_scatter", XFER_F32, 4, sb, n * (size_t)c->size, rb, n, n, op, -1, c, s);
}

static void ref_broadcast(const float *sb, float *rb, size_t n, int root, pl_comm *c, pl_stream *s) {
    coll(XFER_BROADCAST, "broadcast", XFER_F32, 4, sb, c->rank == root ? n : 0, rb, n, n, PL_SUM, root, c, s);
}

static void ref_reduce(const float *sb, float *rb, size_t n, pl_op op, int root, pl_comm *c, pl_stream *s) {
    coll(XFER_REDUCE, "reduce", XFER_F32, 4, sb, n, rb, c->rank == root ? n : 0, n, op, root, c, s);
}

static void ref_alltoall(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    size_t total = n * (size_t)c->size;
    coll(XFER_ALLTOALL, "alltoall", XFER_F32, 4, sb, total, rb, total, n, PL_SUM, -1, c, s);
}

static void ref_allgather_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_comm *c, pl_stream *s) {
    coll(XFER_ALLGATHER, "allgather", XFER_BF16, 2, sb, n, rb, n * (size_t)c->size, n, PL_SUM, -1, c, s);
}

static void ref_reduce_scatter_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    coll(XFER_REDUCE_SCATTER, "reduce_scatter", XFER_BF16, 2, sb, n * (size_t)c->size, rb, n, n, op, -1, c, s);
}

/* -- streams -------------------------------------------------------------------------- */
static void ref_drain(pl_stream *s) {
    wait_list(&g_stream_q[s->id]);
    s->completed = s->issued;
    s->completed_at = pl_trace_clock();
}

static bool ref_test(pl_stream *s) {
    if (!test_list(&g_stream_q[s->id])) return false;
    s->completed = s->issued;
    s->completed_at = pl_trace_clock();
    return true;
}

static void ref_group_post(pl_stream *s) {
    pending_list *q = &g_stream_q[s->id];
    for (size_t i = 0; i < g_group.n; i++) *push(q) = g_group.v[i];
    g_group.n = 0;
    s->issued++;
}

static void ref_finalize(void) {
    wait_list(&g_group);
    wait_list(&g_stream_q[0]);
    wait_list(&g_stream_q[1]);
    free(g_group.v);
    free(g_stream_q[0].v);
    free(g_stream_q[1].v);
    memset(&g_group, 0, sizeof g_group);
    memset(g_stream_q, 0, sizeof g_stream_q);
}

/* -- communicators and the host side ------------------------------------------------------ */
static bool ref_split(pl_comm *parent, int color, int key, pl_comm *out) {
    xfer_req r = {.kind = XFER_SPLIT, .comm = ref_id(parent), .op = color, .key = key};
    xfer_done d;
    wait_one(post(&r, NULL, 0), "comm split", -1, &d, NULL, NULL);
    if (!d.a) return false;
    out->rank = (int)d.b;
    out->size = (int)d.c;
    out->backend = (void *)(intptr_t)d.comm; /* the referee's number for it */
    return true;
}

static void ref_release(pl_comm *c) {
    xfer_req r = {.kind = XFER_FREE, .comm = ref_id(c)};
    wait_one(post(&r, NULL, 0), "comm free", -1, NULL, NULL, NULL);
}

void transport_mark(int mark, bool end) {
    xfer_req r = {.kind = XFER_MARK, .peer = mark, .op = end ? 1 : 0};
    wait_one(post(&r, NULL, 0), "phase mark", -1, NULL, NULL, NULL);
}

void transport_name(pl_comm *c, int label) {
    xfer_req r = {.kind = XFER_NAME, .comm = ref_id(c), .peer = label};
    wait_one(post(&r, NULL, 0), "a communicator's name", -1, NULL, NULL, NULL);
}

static void ref_barrier(pl_comm *c) {
    xfer_req r = {.kind = XFER_BARRIER, .comm = ref_id(c)};
    wait_one(post(&r, NULL, 0), "barrier", -1, NULL, NULL, NULL);
}

static void *host_call(uint32_t kind, const char *op, pl_comm *c, int root, int hop, const void *data, uint64_t len,
                       uint64_t *got) {
    PL_CHECK(len <= WIRE_XFER_INLINE_MAX, "a host collective of more than 64 MiB");
    xfer_req r = {.kind = kind, .comm = ref_id(c), .peer = root, .op = hop, .count = len};
    void *res = NULL;
    wait_one(post(&r, data, len), op, -1, NULL, &res, got);
    return res;
}

static void ref_host_allreduce(double *v, int n, int op, pl_comm *c) {
    uint64_t got = 0;
    void *res = host_call(XFER_HOST_ALLREDUCE, "host allreduce", c, -1, op, v, (uint64_t)n * sizeof *v, &got);
    PL_CHECK(got == (uint64_t)n * sizeof *v, "the referee's host all-reduce returned another size");
    memcpy(v, res, (size_t)got);
    free(res);
}

/* The result: world counts (uint64) then every rank's bytes, to every rank (root < 0) or
 * to root only. */
static void *ref_host_gatherv(const void *mine, size_t bytes, size_t *counts, int root, pl_comm *c) {
    uint64_t got = 0;
    unsigned char *res = host_call(XFER_HOST_GATHERV, "host gather", c, root, 0, mine, bytes, &got);
    bool here = root < 0 || c->rank == root;
    if (!here) {
        free(res);
        return NULL;
    }
    uint64_t head = (uint64_t)c->size * sizeof(uint64_t);
    PL_CHECK(res != NULL && got >= head, "the referee's host gather returned too little");
    uint64_t total = 0;
    for (int r = 0; r < c->size; r++) {
        uint64_t k;
        memcpy(&k, res + (size_t)r * sizeof k, sizeof k);
        if (counts) counts[r] = (size_t)k;
        total += k;
    }
    PL_CHECK(got == head + total, "the referee's host gather returned another size");
    char *all = malloc((size_t)total + 1);
    PL_CHECK(all != NULL, "out of host memory");
    memcpy(all, res + head, (size_t)total);
    free(res);
    return all;
}

static void ref_host_bcast(void *buf, size_t bytes, int root, pl_comm *c) {
    uint64_t got = 0;
    void *res = host_call(XFER_HOST_BCAST, "host broadcast", c, root, 0, buf, bytes, &got);
    PL_CHECK(got == bytes, "the referee's host broadcast returned another size");
    memcpy(buf, res, bytes);
    free(res);
}

static void ref_init(pl_comm *world) { (void)world; }

const pl_comm_backend pl_comm_referee = {
    .name = "referee",
    .init = ref_init,
    .finalize = ref_finalize,
    .group_end = ref_group_end,
    .send = ref_send,
    .recv = ref_recv,
    .allreduce = ref_allreduce,
    .allgather = ref_allgather,
    .reduce_scatter = ref_reduce_scatter,
    .broadcast = ref_broadcast,
    .reduce = ref_reduce,
    .alltoall = ref_alltoall,
    .drain = ref_drain,
    .test = ref_test,
    .group_post = ref_group_post,
    .allgather_bf16 = ref_allgather_bf16,
    .reduce_scatter_bf16 = ref_reduce_scatter_bf16,
    .split = ref_split,
    .release = ref_release,
    .barrier = ref_barrier,
    .host_allreduce = ref_host_allreduce,
    .host_gatherv = ref_host_gatherv,
    .host_bcast = ref_host_bcast,
};


