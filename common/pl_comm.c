/* pl_comm.c - the generic comm layer: communicators, argument checks, group depth and
 * instrumentation of every operation; the backend in pl_cb moves the bytes. Also the host
 * collectives of the harness and the grader (pl_host_*), on private communicators, and the
 * wire counters the backends feed. */
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"    // defines: pl_cb, struct pl_comm, PL_MPI_CHECK
#include "pl_defer.h"      // defines: pl_streams_deferred
#include "pl_instrument.h" // defines: pl_wire, pl_host_op
#include "pl_internal.h"   // defines: pl_trace_record_open, pl_trace_close

static pl_comm g_world;
static int g_next_comm_id = 1;
static int g_group_depth;

/* Events of the point-to-point calls in the open group, closed at the outermost end, and
 * the memory each one reads or writes (check_group_buffers). */
static size_t *g_group_events;
typedef struct {
    const char *lo, *hi;
    bool send;
} group_buf;
static group_buf *g_group_bufs;
static size_t g_group_n, g_group_cap;

/* A communicator for the lab's traffic and a private twin for host collectives. */
static void open_mpi_pair(MPI_Comm from, pl_comm *c) {
    MPI_Comm dup, host;
    PL_MPI_CHECK(MPI_Comm_dup(from, &dup));
    PL_MPI_CHECK(MPI_Comm_dup(from, &host));
    /* Errors come back to the harness, which explains them and aborts the job. */
    PL_MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    PL_MPI_CHECK(MPI_Comm_set_errhandler(host, MPI_ERRORS_RETURN));
    c->mpi = (void *)dup;
    c->host = (void *)host;
}

static void close_mpi_pair(pl_comm *c) {
    MPI_Comm m = (MPI_Comm)c->mpi, h = (MPI_Comm)c->host;
    PL_MPI_CHECK(MPI_Comm_free(&m));
    PL_MPI_CHECK(MPI_Comm_free(&h));
}

/* A transport that is not MPI (pl_use_transport) keeps communicators itself. */
static bool external(void) { return pl_cb->split != NULL; }

void pl_comm_setup_world(void) {
    if (!external()) open_mpi_pair(MPI_COMM_WORLD, &g_world);
    g_world.rank = pl_rank();
    g_world.size = pl_world();
    g_world.id = 0;
    pl_cb->init(&g_world);
}

void pl_comm_teardown(void) {
    pl_comm_defer_teardown();
    if (pl_cb->finalize) pl_cb->finalize();
    if (!external()) close_mpi_pair(&g_world);
    free(g_group_events);
    free(g_group_bufs);
    g_group_events = NULL;
    g_group_bufs = NULL;
    g_group_n = g_group_cap = 0;
}

pl_comm *pl_comm_world(void) { return &g_world; }
int pl_comm_rank(const pl_comm *c) { return c->rank; }
int pl_comm_size(const pl_comm *c) { return c->size; }

pl_comm *pl_comm_split(pl_comm *parent, int color, int key) {
    PL_CHECK(parent != NULL, "pl_comm_split: NULL parent");
    PL_CHECK(g_group_depth == 0, "pl_comm_split inside a group");
    pl_device_sync();
    if (external()) {
        pl_comm made = {0};
        if (!pl_cb->split(parent, color, key, &made)) return NULL;
        pl_comm *c = calloc(1, sizeof *c);
        PL_CHECK(c != NULL, "out of host memory");
        *c = made;
        c->id = g_next_comm_id++;
        if (pl_cb->comm_init) pl_cb->comm_init(c);
        return c;
    }
    MPI_Comm nc;
    PL_MPI_CHECK(MPI_Comm_split((MPI_Comm)parent->mpi, color < 0 ? MPI_UNDEFINED : color, key, &nc));
    if (nc == MPI_COMM_NULL) return NULL;
    pl_comm *c = calloc(1, sizeof *c);
    PL_CHECK(c != NULL, "out of host memory");
    open_mpi_pair(nc, c);
    PL_MPI_CHECK(MPI_Comm_free(&nc));
    PL_MPI_CHECK(MPI_Comm_rank((MPI_Comm)c->mpi, &c->rank));
    PL_MPI_CHECK(MPI_Comm_size((MPI_Comm)c->mpi, &c->size));
    /* each member's world rank, for the trace (the cost model pairs messages by it) */
    MPI_Group mine, world;
    int *ranks = malloc(2 * (size_t)c->size * sizeof *ranks);
    PL_CHECK(ranks != NULL, "out of host memory");
    for (int i = 0; i < c->size; i++) ranks[i] = i;
    PL_MPI_CHECK(MPI_Comm_group((MPI_Comm)c->mpi, &mine));
    PL_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    PL_MPI_CHECK(MPI_Group_translate_ranks(mine, c->size, ranks, world, ranks + c->size));
    PL_MPI_CHECK(MPI_Group_free(&mine));
    PL_MPI_CHECK(MPI_Group_free(&world));
    memmove(ranks, ranks + c->size, (size_t)c->size * sizeof *ranks);
    c->world_of = ranks;
    c->id = g_next_comm_id++;
    if (pl_cb->comm_init) pl_cb->comm_init(c);
    return c;
}

void pl_comm_free(pl_comm *c) {
    if (!c || c == &g_world) return;
    pl_device_sync();
    if (pl_cb->comm_free) pl_cb->comm_free(c);
    if (external()) pl_cb->release(c);
    else close_mpi_pair(c);
    free(c->world_of);
    free(c);
}

/* -- instrumentation -------------------------------------------------------------------- */
static size_t open_event(pl_op_kind kind, int peer, uint64_t bytes, pl_comm *c, pl_stream *s) {
    pl_trace_event e = {.kind = kind, .stream = s->id, .peer = peer, .comm_id = c->id,
                        .comm_size = c->size, .bytes = bytes, .t_start = pl_trace_clock(),
                        .t_end = -1};
    if ((kind == PL_OP_SEND || kind == PL_OP_RECV) && peer >= 0 && peer < c->size && (c->world_of || c == &g_world))
        e.has_peer_world = true, e.peer_world = c->world_of ? c->world_of[peer] : peer;
    return pl_trace_record_open(&e);
}

/* A collective either completed inside the backend call (closed now) or was queued on an
 * asynchronous stream (the backend closes it when it completes): pl_comm_current_event
 * (pl_backend.h) is its trace record while the backend runs. */

static void check_comm(pl_comm *c, pl_stream **s, const char *what) {
    if (!c) pl_fatal(__FILE__, __LINE__, what, "NULL communicator");
    *s = pl_stream_resolve(*s);
}

static void check_bufs(const void *sb, const void *rb, size_t count, const char *what) {
    if (count > (size_t)INT_MAX) pl_fatal(__FILE__, __LINE__, what, "count exceeds INT_MAX elements");
    if (count && (!sb || !rb)) pl_fatal(__FILE__, __LINE__, what, "NULL buffer with count > 0");
}

static void check_rank(int r, const pl_comm *c, const char *what, const char *role) {
    if (r < 0 || r >= c->size) {
        char why[96];
        snprintf(why, sizeof why, "%s %d is not a rank of a communicator of %d", role, r, c->size);
        pl_fatal(__FILE__, __LINE__, what, why);
    }
}

/* -- point-to-point --------------------------------------------------------------------- */
/* A group's operations run at once (NCCL's semantics): memory that one of them receives
 * into and another sends from or receives into holds whatever wins the race. MPI's eager
 * path and the deferred queue (sends read when the group starts, receives land when it
 * completes) would both order them and hide it, so the group is refused at its end. */
static void check_group_buffers(void) {
    for (size_t i = 0; i < g_group_n; i++) {
        if (g_group_bufs[i].send) continue;
        for (size_t j = 0; j < g_group_n; j++) {
            if (j == i || g_group_bufs[i].lo >= g_group_bufs[j].hi || g_group_bufs[j].lo >= g_group_bufs[i].hi) continue;
            static char why[256];
            snprintf(why, sizeof why,
                     "receive %zu of this group writes memory that operation %zu of the same group %s (its "
                     "operations run at once, as on NCCL: reuse a buffer only after pl_group_end)",
                     i + 1, j + 1, g_group_bufs[j].send ? "sends from" : "receives into");
            pl_fatal(__FILE__, __LINE__, "pl_group_end", why);
        }
    }
}

/* Deferred streams: the group is collected here and queued whole at its end (the backend
 * sees it only when the queue starts it). */
void pl_group_start(void) {
    if (g_group_depth++ == 0 && pl_cb->group_start && !pl_streams_deferred()) pl_cb->group_start();
}

void pl_group_end(void) {
    PL_CHECK(g_group_depth > 0, "pl_group_end without pl_group_start");
    if (--g_group_depth > 0) return;
    check_group_buffers();
    if (pl_streams_deferred()) {
        pl_comm_defer_group_end();
        g_group_n = 0;
        return;
    }
    if (pl_cb->group_end) pl_cb->group_end();
    double t = pl_trace_clock();
    for (size_t i = 0; i < g_group_n; i++) pl_trace_close(g_group_events[i], t);
    g_group_n = 0;
}

static void p2p(int is_send, float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    const char *what = is_send ? "pl_send" : "pl_recv";
    check_comm(c, &s, what);
    check_rank(peer, c, what, "peer");
    check_bufs(buf, buf, count, what);
    if (count == 0) return; /* a zero-length message is a no-op on every backend */
    if (peer == c->rank) pl_fatal(__FILE__, __LINE__, what, "send/recv to self: use pl_copy");
    size_t ev = open_event(is_send ? PL_OP_SEND : PL_OP_RECV, peer, count * sizeof(float), c, s);
    if (g_group_n == g_group_cap) {
        g_group_cap = g_group_cap ? 2 * g_group_cap : 64;
        g_group_events = realloc(g_group_events, g_group_cap * sizeof *g_group_events);
        g_group_bufs = realloc(g_group_bufs, g_group_cap * sizeof *g_group_bufs);
        PL_CHECK(g_group_events != NULL && g_group_bufs != NULL, "out of host memory");
    }
    g_group_bufs[g_group_n] = (group_buf){(const char *)buf, (const char *)(buf + count), is_send != 0};
    g_group_events[g_group_n++] = ev;
    /* Outside a group, a call is a group of one. */
    pl_group_start();
    if (pl_streams_deferred()) {
        pl_comm_defer_p2p(is_send, buf, count, peer, c, s, ev);
        pl_group_end();
        return;
    }
    if (is_send) pl_cb->send(buf, count, peer, c, s);
    else pl_cb->recv(buf, count, peer, c, s);
    pl_group_end();
}

void pl_send(const float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    p2p(1, (float *)buf, count, peer, c, s);
}

void pl_recv(float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    p2p(0, buf, count, peer, c, s);
}

/* -- collectives ------------------------------------------------------------------------- */
static void begin_coll(pl_op_kind kind, int root, uint64_t bytes, pl_comm *c, pl_stream *s,
                       const char *what) {
    PL_CHECK(g_group_depth == 0 || pl_info()->comm == PL_COMM_NCCL,
             "library collectives inside a group are only supported on nccl");
    (void)what;
    pl_comm_current_event = open_event(kind, root, bytes, c, s);
}

static void end_coll(pl_stream *s, uint64_t issued_before) {
    if (s->issued == issued_before) pl_trace_close_now(pl_comm_current_event);
    pl_comm_current_event = (size_t)-1;
}

/* Deferred streams: queue the collective, of es-byte elements (its record stays open until
 * it completes). */
static bool deferred(pl_op_kind kind, const void *sb, void *rb, size_t n, size_t es, pl_op op, int root,
                     pl_comm *c, pl_stream *s) {
    size_t ev = pl_comm_current_event;
    if (!pl_comm_defer_coll(kind, sb, rb, n, es, op, root, c, s, ev)) return false;
    pl_comm_current_event = (size_t)-1;
    return true;
}

#define COLL_BYTES(n) ((uint64_t)(n) * sizeof(float))

void pl_allreduce(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_allreduce");
    check_bufs(sb, rb, n, "pl_allreduce");
    uint64_t before = s->issued;
    begin_coll(PL_OP_ALLREDUCE, -1, COLL_BYTES(n), c, s, "pl_allreduce");
    if (deferred(PL_OP_ALLREDUCE, sb, rb, n, sizeof(float), op, -1, c, s)) return;
    pl_cb->allreduce(sb, rb, n, op, c, s);
    end_coll(s, before);
}

void pl_allgather(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_allgather");
    check_bufs(sb, rb, n * (size_t)c->size, "pl_allgather");
    uint64_t before = s->issued;
    begin_coll(PL_OP_ALLGATHER, -1, COLL_BYTES(n) * c->size, c, s, "pl_allgather");
    if (deferred(PL_OP_ALLGATHER, sb, rb, n, sizeof(float), PL_SUM, -1, c, s)) return;
    pl_cb->allgather(sb, rb, n, c, s);
    end_coll(s, before);
}

void pl_reduce_scatter(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_reduce_scatter");
    check_bufs(sb, rb, n * (size_t)c->size, "pl_reduce_scatter");
    uint64_t before = s->issued;
    begin_coll(PL_OP_REDUCE_SCATTER, -1, COLL_BYTES(n) * c->size, c, s, "pl_reduce_scatter");
    if (deferred(PL_OP_REDUCE_SCATTER, sb, rb, n, sizeof(float), op, -1, c, s)) return;
    pl_cb->reduce_scatter(sb, rb, n, op, c, s);
    end_coll(s, before);
}

void pl_broadcast(const float *sb, float *rb, size_t n, int root, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_broadcast");
    check_rank(root, c, "pl_broadcast", "root");
    check_bufs(c->rank == root ? sb : rb, rb, n, "pl_broadcast");
    uint64_t before = s->issued;
    begin_coll(PL_OP_BROADCAST, root, COLL_BYTES(n), c, s, "pl_broadcast");
    if (deferred(PL_OP_BROADCAST, sb, rb, n, sizeof(float), PL_SUM, root, c, s)) return;
    pl_cb->broadcast(sb, rb, n, root, c, s);
    end_coll(s, before);
}

void pl_reduce(const float *sb, float *rb, size_t n, pl_op op, int root, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_reduce");
    check_rank(root, c, "pl_reduce", "root");
    check_bufs(sb, c->rank == root ? rb : sb, n, "pl_reduce");
    uint64_t before = s->issued;
    begin_coll(PL_OP_REDUCE, root, COLL_BYTES(n), c, s, "pl_reduce");
    if (deferred(PL_OP_REDUCE, sb, rb, n, sizeof(float), op, root, c, s)) return;
    pl_cb->reduce(sb, rb, n, op, root, c, s);
    end_coll(s, before);
}

void pl_alltoall(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_alltoall");
    check_bufs(sb, rb, n * (size_t)c->size, "pl_alltoall");
    uint64_t before = s->issued;
    begin_coll(PL_OP_ALLTOALL, -1, COLL_BYTES(n) * c->size, c, s, "pl_alltoall");
    if (deferred(PL_OP_ALLTOALL, sb, rb, n, sizeof(float), PL_SUM, -1, c, s)) return;
    pl_cb->alltoall(sb, rb, n, c, s);
    end_coll(s, before);
}

/* bf16: S counts 2 bytes per element; the same checks and the same record. */
void pl_allgather_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_allgather_bf16");
    check_bufs(sb, rb, n * (size_t)c->size, "pl_allgather_bf16");
    if (!pl_cb->allgather_bf16) pl_fatal(__FILE__, __LINE__, "pl_allgather_bf16", "this comm backend has no bf16 collectives");
    uint64_t before = s->issued;
    begin_coll(PL_OP_ALLGATHER, -1, (uint64_t)n * 2 * c->size, c, s, "pl_allgather_bf16");
    if (deferred(PL_OP_ALLGATHER, sb, rb, n, 2, PL_SUM, -1, c, s)) return;
    pl_cb->allgather_bf16(sb, rb, n, c, s);
    end_coll(s, before);
}

void pl_reduce_scatter_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    check_comm(c, &s, "pl_reduce_scatter_bf16");
    check_bufs(sb, rb, n * (size_t)c->size, "pl_reduce_scatter_bf16");
    if (!pl_cb->reduce_scatter_bf16)
        pl_fatal(__FILE__, __LINE__, "pl_reduce_scatter_bf16", "this comm backend has no bf16 collectives");
    if (op == PL_MAX) pl_fatal(__FILE__, __LINE__, "pl_reduce_scatter_bf16", "bf16 reductions are PL_SUM or PL_AVG");
    uint64_t before = s->issued;
    begin_coll(PL_OP_REDUCE_SCATTER, -1, (uint64_t)n * 2 * c->size, c, s, "pl_reduce_scatter_bf16");
    if (deferred(PL_OP_REDUCE_SCATTER, sb, rb, n, 2, op, -1, c, s)) return;
    pl_cb->reduce_scatter_bf16(sb, rb, n, op, c, s);
    end_coll(s, before);
}

void pl_barrier(pl_comm *c) {
    PL_CHECK(c != NULL, "pl_barrier: NULL communicator");
    PL_CHECK(g_group_depth == 0, "pl_barrier inside a group");
    pl_device_sync();
    if (external()) {
        pl_cb->barrier(c);
        return;
    }
    MPI_Request req;
    PL_MPI_CHECK(MPI_Ibarrier((MPI_Comm)c->mpi, &req));
    int done = 0;
    pl_watchdog_arm("barrier", -1);
    for (;;) {
        PL_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) break;
        pl_watchdog_poll();
        sched_yield(); /* ranks often outnumber cores here */
    }
    pl_watchdog_disarm();
}

/* -- wire counters ------------------------------------------------------------------------ */
static pl_wire g_wire;

void pl_wire_p2p(int is_send, uint64_t bytes) {
    if (is_send) g_wire.p2p_bytes_sent += bytes, g_wire.p2p_msgs_sent++;
    else g_wire.p2p_bytes_recv += bytes, g_wire.p2p_msgs_recv++;
}
void pl_wire_coll(uint64_t bytes) {
    g_wire.coll_calls++;
    g_wire.coll_bytes += bytes;
}
void pl_wire_get(pl_wire *w) { *w = g_wire; }

/* -- host collectives --------------------------------------------------------------------- */
static MPI_Comm host_of(pl_comm *c) { return (MPI_Comm)(c ? c : &g_world)->host; }

/* Deferred streams: a rank blocked in a host collective must not hold back work a peer
 * waits for, so everything pending runs first. */
static void host_ready(void) {
    if (pl_streams_deferred()) pl_device_sync();
}

void pl_host_allreduce(double *v, int n, pl_host_op op, pl_comm *c) {
    host_ready();
    if (external()) {
        pl_cb->host_allreduce(v, n, (int)op, c ? c : &g_world);
        return;
    }
    MPI_Op mop = op == PL_HOST_MAX ? MPI_MAX : op == PL_HOST_MIN ? MPI_MIN : MPI_SUM;
    pl_watchdog_arm("host allreduce", -1);
    PL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, mop, host_of(c)));
    pl_watchdog_disarm();
}

/* Gathers to every rank (root < 0) or to root only (the others get NULL). */
static void *host_gatherv(const void *mine, size_t bytes, size_t *counts, int root, pl_comm *c) {
    host_ready();
    if (external()) return pl_cb->host_gatherv(mine, bytes, counts, root, c ? c : &g_world);
    MPI_Comm comm = host_of(c);
    int size = 0;
    PL_MPI_CHECK(MPI_Comm_size(comm, &size));
    PL_CHECK(bytes <= (size_t)INT_MAX, "pl_host_gatherv: more than 2 GiB from one rank");
    int n = (int)bytes, *cnt = malloc((size_t)size * sizeof *cnt), *displ = malloc((size_t)size * sizeof *displ);
    PL_CHECK(cnt && displ, "out of host memory");
    int me = 0;
    PL_MPI_CHECK(MPI_Comm_rank(comm, &me));
    bool here = root < 0 || me == root;
    pl_watchdog_arm("host gather", -1);
    if (root < 0) PL_MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, cnt, 1, MPI_INT, comm));
    else PL_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, cnt, 1, MPI_INT, root, comm));
    long long total = 0;
    for (int r = 0; here && r < size; r++) {
        PL_CHECK(total <= INT_MAX, "pl_host_gatherv: more than 2 GiB in all");
        displ[r] = (int)total;
        total += cnt[r];
        if (counts) counts[r] = (size_t)cnt[r];
    }
    PL_CHECK(total <= INT_MAX, "pl_host_gatherv: more than 2 GiB in all");
    char *all = here ? malloc((size_t)total + 1) : NULL;
    PL_CHECK(!here || all != NULL, "out of host memory");
    if (root < 0) PL_MPI_CHECK(MPI_Allgatherv(mine, n, MPI_BYTE, all, cnt, displ, MPI_BYTE, comm));
    else PL_MPI_CHECK(MPI_Gatherv(mine, n, MPI_BYTE, all, cnt, displ, MPI_BYTE, root, comm));
    pl_watchdog_disarm();
    free(cnt);
    free(displ);
    return all;
}

void *pl_host_allgatherv(const void *mine, size_t bytes, size_t *counts, pl_comm *c) {
    return host_gatherv(mine, bytes, counts, -1, c);
}
void *pl_host_gatherv(const void *mine, size_t bytes, size_t *counts, int root, pl_comm *c) {
    return host_gatherv(mine, bytes, counts, root, c);
}

void pl_host_bcast(void *buf, size_t bytes, int root, pl_comm *c) {
    PL_CHECK(bytes <= (size_t)INT_MAX, "pl_host_bcast: more than 2 GiB");
    host_ready();
    if (external()) {
        pl_cb->host_bcast(buf, bytes, root, c ? c : &g_world);
        return;
    }
    pl_watchdog_arm("host broadcast", -1);
    PL_MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, host_of(c)));
    pl_watchdog_disarm();
}
