/* transport.c - the referees move their players' messages (graded runs on the cpu device).
 *
 * The player has no MPI and no socket but its control socket: each of its sends, receives,
 * collectives, barriers, splits and host collectives arrives here as a request (wire.h),
 * its operands in the region's arena. The referee checks the request against the arena and
 * its communicators, posts it on its own MPI (non-blocking, so a group's operations progress
 * together and a collective on the comm stream overlaps the player's computing), counts it,
 * and tells the player when it completed. What these counters say is what the rubric's
 * traffic items read: the player cannot write them.
 *
 * The referees talk over MPI among themselves (this file's communicators; the player's are
 * numbered here too), also for the runner's cross-rank values (transport_allgather). Sends
 * are synchronous (MPI_Issend), as in the harness's mpi backend, so a program that would
 * deadlock on NCCL deadlocks here too. */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_internal.h" // defines: pl_share_progress_board, pl_progress_node, pl_progress_busy
#include "referee.h"

#define TAG_P2P 7

static bool g_on;
static unsigned char *g_arena;
static uint64_t g_arena_bytes;
static int g_ctl = -1;
static MPI_Comm g_relay = MPI_COMM_NULL;
static MPI_Op g_bf16_sum = MPI_OP_NULL;

/* The player's communicators by the number the referee gave them (0: the world), with what
 * moved on each since it was made, its members and the name the kit gave it. */
typedef struct {
    MPI_Comm c;
    uint64_t members; /* world ranks, bit r (worlds of up to 64; 0 beyond)          */
    int label;        /* drv_name_comm's, or -1                                     */
    drv_traffic moved;
} comm_entry;
static comm_entry *g_comms;
static int g_ncomms;

static transport_counts g_count;
/* Measured phases by mark: the counters when each began, and what moved until it ended. */
static transport_counts g_mark_at[WIRE_MARKS], g_mark_moved[WIRE_MARKS];
static bool g_mark_open[WIRE_MARKS], g_mark_done[WIRE_MARKS];
static int g_marks_open;
/* ... and communicator by communicator: each one's counts when the phase began (a number
 * is not given to a new communicator while a phase is open), then what moved on it. */
static drv_traffic *g_mark_comm_at[WIRE_MARKS];
static drv_comm_moved *g_mark_comms[WIRE_MARKS];
static int g_mark_ncomm_at[WIRE_MARKS], g_mark_ncomms[WIRE_MARKS];

typedef struct {
    MPI_Request req;
    uint64_t id;
    uint32_t kind;
    int32_t parent;       /* a split: its parent, and this rank's colour and key        */
    int pair[2];
    int *all;             /* a split: every rank's colour and key                       */
    int err;              /* MPI's error class once it completed with one               */
} pending;

static pending *g_pend;
static size_t g_npend, g_cappend;

bool transport_on(void) { return g_on; }
bool transport_busy(void) { return g_npend > 0; }

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = pl_bf16_from_float(pl_bf16_to_float(a[i]) + pl_bf16_to_float(b[i]));
}

static uint64_t members_of(MPI_Comm c) {
    int n = 0, world = 0;
    MPI_Comm_size(c, &n);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world > 64) return 0;
    MPI_Group g, w;
    MPI_Comm_group(c, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &w);
    int *mine = malloc((size_t)n * 2 * sizeof(int));
    PL_CHECK(mine != NULL, "out of host memory");
    for (int i = 0; i < n; i++) mine[i] = i;
    MPI_Group_translate_ranks(g, n, mine, w, mine + n);
    uint64_t bits = 0;
    for (int i = 0; i < n; i++)
        if (mine[n + i] >= 0 && mine[n + i] < 64) bits |= (uint64_t)1 << mine[n + i];
    free(mine);
    MPI_Group_free(&g), MPI_Group_free(&w);
    return bits;
}

static int add_comm(MPI_Comm c) {
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int at = g_ncomms;
    for (int i = 1; i < g_ncomms && g_marks_open == 0; i++)
        if (g_comms[i].c == MPI_COMM_NULL) {
            at = i;
            break;
        }
    if (at == g_ncomms) {
        comm_entry *v = realloc(g_comms, (size_t)(g_ncomms + 1) * sizeof *v);
        PL_CHECK(v != NULL, "out of host memory");
        g_comms = v;
        g_ncomms++;
    }
    g_comms[at] = (comm_entry){.c = c, .members = members_of(c), .label = -1};
    return at;
}

void transport_start(unsigned char *arena, uint64_t arena_bytes, int ctl_fd) {
    /* Open MPI's single-copy transport reads a peer's memory with process_vm_readv, which a
     * referee's peers may not (referees are undumpable): copy through shared memory. */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS)
        pl_fatal(__FILE__, __LINE__, "MPI_Init (the referees' transport)", "failed");
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    add_comm(world);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_relay);
    MPI_Op_create(bf16_sum, 1, &g_bf16_sum);
    /* the node's referees share a progress board: each ticks on what it moves and shows as
     * busy while its player starts or computes (player_recv); the player sees the board
     * through the arena's head (transport_show_node) */
    pl_share_progress_board();
    g_arena = arena;
    g_arena_bytes = arena_bytes;
    g_ctl = ctl_fd;
    g_on = true;
}

void transport_stop(void) {
    if (!g_on) return;
    g_on = false;
    pl_free_progress_board();
    MPI_Finalize();
}

void transport_allgather(const void *mine, size_t bytes, void *out) {
    if (MPI_Allgather(mine, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, g_relay) != MPI_SUCCESS)
        pl_fatal(__FILE__, __LINE__, "MPI_Allgather (between referees)", "failed");
}

void transport_counted(transport_counts *k) { *k = g_count; }

void transport_since(const transport_counts *k0, const transport_counts *k1, transport_counts *d) {
    memset(d, 0, sizeof *d);
    d->m.bytes_sent = k1->m.bytes_sent - k0->m.bytes_sent, d->m.bytes_recv = k1->m.bytes_recv - k0->m.bytes_recv;
    d->m.msgs_sent = k1->m.msgs_sent - k0->m.msgs_sent, d->m.msgs_recv = k1->m.msgs_recv - k0->m.msgs_recv;
    for (int i = 0; i < PL_OP_COUNT; i++) d->m.coll_calls[i] = k1->m.coll_calls[i] - k0->m.coll_calls[i];
    for (int i = 0; i < PL_OP_COUNT; i++) d->coll_bytes[i] = k1->coll_bytes[i] - k0->coll_bytes[i];
    d->m.coll_bytes = k1->m.coll_bytes - k0->m.coll_bytes, d->m.coll_total = k1->m.coll_total - k0->m.coll_total;
    d->wire = (pl_wire){k1->wire.p2p_bytes_sent - k0->wire.p2p_bytes_sent, k1->wire.p2p_msgs_sent - k0->wire.p2p_msgs_sent,
                        k1->wire.p2p_bytes_recv - k0->wire.p2p_bytes_recv, k1->wire.p2p_msgs_recv - k0->wire.p2p_msgs_recv,
                        k1->wire.coll_calls - k0->wire.coll_calls, k1->wire.coll_bytes - k0->wire.coll_bytes};
}

void transport_overwrite(pl_metrics *m, pl_wire *w, const transport_counts *d) {
    m->bytes_sent = d->m.bytes_sent, m->bytes_recv = d->m.bytes_recv;
    m->msgs_sent = d->m.msgs_sent, m->msgs_recv = d->m.msgs_recv;
    memcpy(m->coll_calls, d->m.coll_calls, sizeof m->coll_calls);
    m->coll_bytes = d->m.coll_bytes, m->coll_total = d->m.coll_total;
    *w = d->wire;
}

void transport_marks_clear(void) {
    memset(g_mark_open, 0, sizeof g_mark_open);
    memset(g_mark_done, 0, sizeof g_mark_done);
    g_marks_open = 0;
}

bool transport_phase(int mark, transport_counts *moved) {
    if (mark < 0 || mark >= WIRE_MARKS || !g_mark_done[mark]) return false;
    *moved = g_mark_moved[mark];
    return true;
}

static void mark_comms_begin(int mark) {
    free(g_mark_comm_at[mark]);
    g_mark_comm_at[mark] = malloc((size_t)g_ncomms * sizeof(drv_traffic) + 1);
    PL_CHECK(g_mark_comm_at[mark] != NULL, "out of host memory");
    for (int i = 0; i < g_ncomms; i++) g_mark_comm_at[mark][i] = g_comms[i].moved;
    g_mark_ncomm_at[mark] = g_ncomms;
}

static void mark_comms_end(int mark) {
    free(g_mark_comms[mark]);
    g_mark_comms[mark] = calloc((size_t)g_ncomms + 1, sizeof(drv_comm_moved));
    PL_CHECK(g_mark_comms[mark] != NULL, "out of host memory");
    int n = 0;
    for (int i = 0; i < g_ncomms; i++) {
        drv_traffic d = g_comms[i].moved;
        if (i < g_mark_ncomm_at[mark]) { /* made before the phase: what moved since it began */
            const drv_traffic *a = &g_mark_comm_at[mark][i];
            for (int k = 0; k < PL_OP_COUNT; k++) d.calls[k] -= a->calls[k];
            d.bytes -= a->bytes, d.msgs -= a->msgs, d.msg_bytes -= a->msg_bytes;
        }
        bool any = d.bytes != 0 || d.msgs != 0;
        for (int k = 0; k < PL_OP_COUNT; k++) any = any || d.calls[k] != 0;
        if (any) g_mark_comms[mark][n++] = (drv_comm_moved){.world = i == 0, .label = g_comms[i].label,
                                                             .members = g_comms[i].members, .t = d};
    }
    g_mark_ncomms[mark] = n;
}

int transport_phase_comms(int mark, drv_comm_moved *out, int max) {
    if (mark < 0 || mark >= WIRE_MARKS || !g_mark_done[mark]) return 0;
    int n = g_mark_ncomms[mark] < max ? g_mark_ncomms[mark] : max;
    memcpy(out, g_mark_comms[mark], (size_t)n * sizeof *out);
    return n;
}

/* ---- requests ------------------------------------------------------------------------- */
static pending *push(const xfer_req *r) {
    if (g_npend == g_cappend) {
        g_cappend = g_cappend ? 2 * g_cappend : 32;
        g_pend = realloc(g_pend, g_cappend * sizeof *g_pend);
        PL_CHECK(g_pend != NULL, "out of host memory");
    }
    pending *p = &g_pend[g_npend++];
    memset(p, 0, sizeof *p);
    p->req = MPI_REQUEST_NULL;
    p->id = r->id;
    p->kind = r->kind;
    return p;
}

static int reply(uint64_t id, int64_t a, int64_t b, int64_t c, int64_t comm, const void *data, uint64_t len) {
    size_t n = sizeof(xfer_done) + (size_t)len;
    unsigned char *msg = malloc(n);
    PL_CHECK(msg != NULL, "out of host memory");
    xfer_done d = {.id = id, .a = a, .b = b, .c = c, .comm = comm};
    memcpy(msg, &d, sizeof d);
    if (len) memcpy(msg + sizeof d, data, (size_t)len);
    int ok = wire_send(g_ctl, CMD_XFER_DONE, 0, msg, n);
    free(msg);
    return ok;
}

/* The arena's bytes [off, off + bytes), or NULL when they are not all inside it. */
static void *arena(uint64_t off, uint64_t bytes) {
    if (off > g_arena_bytes || bytes > g_arena_bytes - off) return NULL;
    return g_arena + off;
}

static void count_coll(pl_op_kind kind, uint64_t bytes) {
    g_count.m.coll_calls[kind]++;
    g_count.m.coll_bytes += bytes;
    g_count.coll_bytes[kind] += bytes;
    g_count.m.coll_total++;
    g_count.wire.coll_calls++;
    g_count.wire.coll_bytes += bytes;
}

/* Whether the player works (starts, computes) while its referee waits for it, on the node's
 * board as the referee's busy mark (player_recv sets it; a referee waiting for the others
 * clears it). */
void transport_player_works(bool yes) {
    static bool now;
    if (yes == now) return;
    now = yes;
    pl_progress_busy(yes ? 1 : 0);
}

/* A host collective's wait: the player waits with it (for the other players), so the referee
 * is not busy, and it keeps copying the node's board to the player's watchdog meanwhile. */
static void host_wait(MPI_Request *rq) {
    transport_player_works(false);
    int done = 0;
    for (unsigned spins = 0;; spins++) {
        if (spins % 16 == 0) transport_show_node();
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) break;
        if (spins % 16 == 15) sched_yield();
    }
    pl_progress_tick();
}

/* A host collective on comm, waited for here (host_wait): the result goes back in the reply. */
static const char *host_op(const xfer_req *r, MPI_Comm comm, const unsigned char *data, uint64_t len, int *sent) {
    int size = 0, me = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    *sent = 1;
    if (r->kind == XFER_HOST_ALLREDUCE) {
        if (len % sizeof(double) || (r->op < 0 || r->op > 2)) return "a host all-reduce of a malformed size or operation";
        double *v = malloc((size_t)len + 8);
        PL_CHECK(v != NULL, "out of host memory");
        memcpy(v, data, (size_t)len);
        MPI_Op op = r->op == PL_HOST_MAX ? MPI_MAX : r->op == PL_HOST_MIN ? MPI_MIN : MPI_SUM;
        MPI_Request rq;
        MPI_Iallreduce(MPI_IN_PLACE, v, (int)(len / sizeof(double)), MPI_DOUBLE, op, comm, &rq);
        host_wait(&rq);
        *sent = reply(r->id, 0, 0, 0, 0, v, len);
        free(v);
        return NULL;
    }
    if (r->kind == XFER_HOST_BCAST) {
        if (r->peer < 0 || r->peer >= size) return "a host broadcast from a root outside the communicator";
        unsigned char *v = malloc((size_t)len + 1);
        PL_CHECK(v != NULL, "out of host memory");
        memcpy(v, data, (size_t)len);
        MPI_Request rq;
        MPI_Ibcast(v, (int)len, MPI_BYTE, r->peer, comm, &rq);
        host_wait(&rq);
        *sent = reply(r->id, 0, 0, 0, 0, v, len);
        free(v);
        return NULL;
    }
    /* gatherv: counts first, then the bytes; the reply is the counts and every rank's bytes */
    if (r->peer < -1 || r->peer >= size) return "a host gather to a root outside the communicator";
    int n = (int)len, *cnt = calloc((size_t)size, sizeof *cnt), *displ = calloc((size_t)size, sizeof *displ);
    PL_CHECK(cnt && displ, "out of host memory");
    bool here = r->peer < 0 || me == r->peer;
    MPI_Request rq;
    if (r->peer < 0) MPI_Iallgather(&n, 1, MPI_INT, cnt, 1, MPI_INT, comm, &rq);
    else MPI_Igather(&n, 1, MPI_INT, cnt, 1, MPI_INT, r->peer, comm, &rq);
    host_wait(&rq);
    uint64_t total = 0;
    for (int i = 0; here && i < size; i++) displ[i] = (int)total, total += (uint64_t)cnt[i];
    uint64_t head = (uint64_t)size * sizeof(uint64_t);
    unsigned char *all = here ? malloc((size_t)(head + total) + 1) : NULL;
    PL_CHECK(!here || all != NULL, "out of host memory");
    if (r->peer < 0) MPI_Iallgatherv(data, n, MPI_BYTE, all + head, cnt, displ, MPI_BYTE, comm, &rq);
    else MPI_Igatherv(data, n, MPI_BYTE, here ? all + head : NULL, cnt, displ, MPI_BYTE, r->peer, comm, &rq);
    host_wait(&rq);
    if (here)
        for (int i = 0; i < size; i++) {
            uint64_t k = (uint64_t)cnt[i];
            memcpy(all + (size_t)i * sizeof k, &k, sizeof k);
        }
    *sent = reply(r->id, 0, 0, 0, 0, all, here ? head + total : 0);
    free(all);
    free(cnt);
    free(displ);
    return NULL;
}

/* One request from the player: posted, or the reason it cannot be (the player broke the
 * protocol). *sent is 0 when a reply could not be written (the player is gone). */
const char *transport_request(const void *payload, uint64_t len, int *sent) {
    *sent = 1;
    xfer_req r;
    if (len < sizeof r) return "a transport request shorter than its header";
    memcpy(&r, payload, sizeof r);
    const unsigned char *data = (const unsigned char *)payload + sizeof r;
    uint64_t dlen = len - sizeof r;
    if (r.kind < XFER_SEND || r.kind >= XFER_KINDS) return "a transport request of an unknown kind";
    if (r.comm < 0 || r.comm >= g_ncomms || g_comms[r.comm].c == MPI_COMM_NULL)
        return "a transport request on a communicator it does not have";
    MPI_Comm comm = g_comms[r.comm].c;
    drv_traffic *on = &g_comms[r.comm].moved;
    int size = 0, me = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    if (r.kind >= XFER_HOST_ALLREDUCE && r.kind <= XFER_HOST_BCAST) {
        if (dlen != r.count || dlen > WIRE_XFER_INLINE_MAX) return "a host collective whose bytes do not match its count";
        return host_op(&r, comm, data, dlen, sent);
    }
    if (dlen) return "bytes after a request that carries none";
    if (r.kind == XFER_FREE) {
        if (r.comm == 0) return "a request to free the world";
        MPI_Comm_free(&g_comms[r.comm].c);
        g_comms[r.comm].c = MPI_COMM_NULL;
        *sent = reply(r.id, 0, 0, 0, 0, NULL, 0);
        return NULL;
    }
    if (r.kind == XFER_MARK) { /* the player's bounds of a phase; the counts are ours */
        if (r.peer < 0 || r.peer >= WIRE_MARKS || (r.op != 0 && r.op != 1)) return "a phase mark of no phase";
        /* once each per case, begin before end: a phase cannot be restarted or cut short twice */
        if (r.op == 0) {
            if (g_mark_open[r.peer] || g_mark_done[r.peer]) return "a phase begun a second time in one case";
            g_mark_at[r.peer] = g_count, g_mark_open[r.peer] = true, g_marks_open++;
            mark_comms_begin(r.peer);
        } else {
            if (!g_mark_open[r.peer]) return "the end of a phase that had not begun";
            transport_since(&g_mark_at[r.peer], &g_count, &g_mark_moved[r.peer]);
            mark_comms_end(r.peer);
            g_mark_open[r.peer] = false, g_mark_done[r.peer] = true, g_marks_open--;
        }
        *sent = reply(r.id, 0, 0, 0, 0, NULL, 0);
        return NULL;
    }
    if (r.kind == XFER_NAME) { /* the kit's name for one of its communicators (a label, no more) */
        if (r.comm == 0 || r.peer < 0 || r.peer >= 64) return "a communicator's name out of range";
        g_comms[r.comm].label = r.peer;
        *sent = reply(r.id, 0, 0, 0, 0, NULL, 0);
        return NULL;
    }
    if (r.kind == XFER_BARRIER) {
        on->calls[PL_OP_BARRIER] += 1;
        pending *p = push(&r);
        MPI_Ibarrier(comm, &p->req);
        return NULL;
    }
    if (r.kind == XFER_SPLIT) { /* every rank's colour and key first: the split itself waits for none */
        pending *p = push(&r);
        p->parent = r.comm;
        p->pair[0] = r.op < 0 ? MPI_UNDEFINED : r.op;
        p->pair[1] = r.key;
        p->all = malloc(2 * (size_t)size * sizeof *p->all);
        PL_CHECK(p->all != NULL, "out of host memory");
        MPI_Iallgather(p->pair, 2, MPI_INT, p->all, 2, MPI_INT, comm, &p->req);
        return NULL;
    }
    if (r.dtype != XFER_F32 && !(r.dtype == XFER_BF16 && (r.kind == XFER_ALLGATHER || r.kind == XFER_REDUCE_SCATTER)))
        return "a transport request of an element type it may not use";
    if (r.count > (uint64_t)INT32_MAX / (uint64_t)size) return "a transport request of more than 2^31 elements";
    uint64_t es = r.dtype == XFER_BF16 ? 2 : 4, n = r.count, all = n * (uint64_t)size;
    MPI_Datatype t = r.dtype == XFER_BF16 ? MPI_UINT16_T : MPI_FLOAT;
    if (r.kind == XFER_SEND || r.kind == XFER_RECV) {
        if (r.peer < 0 || r.peer >= size || r.peer == me) return "a message to a peer outside the communicator";
        bool send = r.kind == XFER_SEND;
        void *buf = arena(send ? r.in_off : r.out_off, n * es);
        if (!buf) return "a message outside the transport's arena";
        pending *p = push(&r);
        if (send) {
            MPI_Issend(buf, (int)n, t, r.peer, TAG_P2P, comm, &p->req);
            on->msgs += 1, on->msg_bytes += (double)(n * es);
            g_count.m.bytes_sent += n * es, g_count.m.msgs_sent++;
            g_count.wire.p2p_bytes_sent += n * es, g_count.wire.p2p_msgs_sent++;
        } else {
            MPI_Irecv(buf, (int)n, t, r.peer, TAG_P2P, comm, &p->req);
            g_count.m.bytes_recv += n * es, g_count.m.msgs_recv++;
            g_count.wire.p2p_bytes_recv += n * es, g_count.wire.p2p_msgs_recv++;
        }
        return NULL;
    }
    bool rooted = r.kind == XFER_BROADCAST || r.kind == XFER_REDUCE;
    if (rooted && (r.peer < 0 || r.peer >= size)) return "a collective from a root outside the communicator";
    if (r.op != PL_SUM && r.op != PL_MAX && r.op != PL_AVG) return "a collective with an unknown reduction";
    if (r.dtype == XFER_BF16 && r.op == PL_MAX) return "a bf16 reduction other than a sum";
    bool is_root = rooted && me == r.peer;
    uint64_t in_n = 0, out_n = 0;
    pl_op_kind kind = PL_OP_ALLREDUCE;
    switch (r.kind) {
    case XFER_ALLREDUCE: in_n = n, out_n = n, kind = PL_OP_ALLREDUCE; break;
    case XFER_ALLGATHER: in_n = n, out_n = all, kind = PL_OP_ALLGATHER; break;
    case XFER_REDUCE_SCATTER: in_n = all, out_n = n, kind = PL_OP_REDUCE_SCATTER; break;
    case XFER_BROADCAST: in_n = is_root ? n : 0, out_n = n, kind = PL_OP_BROADCAST; break;
    case XFER_REDUCE: in_n = n, out_n = is_root ? n : 0, kind = PL_OP_REDUCE; break;
    case XFER_ALLTOALL: in_n = all, out_n = all, kind = PL_OP_ALLTOALL; break;
    default: return "a transport request of an unknown kind";
    }
    void *in = arena(r.in_off, in_n * es), *out = arena(r.out_off, out_n * es);
    if (!in || !out) return "a collective's operands outside the transport's arena";
    if (in_n && out_n && (char *)in < (char *)out + out_n * es && (char *)out < (char *)in + in_n * es)
        return "a collective whose input and output overlap in the arena";
    uint64_t S = (kind == PL_OP_ALLREDUCE || kind == PL_OP_BROADCAST || kind == PL_OP_REDUCE ? n : all) * es;
    count_coll(kind, S);
    on->calls[kind] += 1, on->bytes += (double)S;
    MPI_Op op = r.dtype == XFER_BF16 ? g_bf16_sum : r.op == PL_MAX ? MPI_MAX : MPI_SUM;
    pending *p = push(&r);
    int c = (int)n;
    switch (r.kind) {
    case XFER_ALLREDUCE: MPI_Iallreduce(in, out, c, t, op, comm, &p->req); break;
    case XFER_ALLGATHER: MPI_Iallgather(in, c, t, out, c, t, comm, &p->req); break;
    case XFER_REDUCE_SCATTER: MPI_Ireduce_scatter_block(in, out, c, t, op, comm, &p->req); break;
    case XFER_BROADCAST:
        if (is_root && n) memcpy(out, in, n * es);
        MPI_Ibcast(out, c, t, r.peer, comm, &p->req);
        break;
    case XFER_REDUCE: MPI_Ireduce(in, is_root ? out : NULL, c, t, op, r.peer, comm, &p->req); break;
    default: MPI_Ialltoall(in, c, t, out, c, t, comm, &p->req); break;
    }
    return NULL;
}

/* A split whose colours and keys arrived: the communicator, numbered, or none. */
static int finish_split(pending *p) {
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_Comm_split(g_comms[p->parent].c, p->pair[0], p->pair[1], &nc);
    free(p->all);
    p->all = NULL;
    if (nc == MPI_COMM_NULL) return reply(p->id, 0, 0, 0, 0, NULL, 0);
    int rank = 0, size = 0;
    MPI_Comm_rank(nc, &rank);
    MPI_Comm_size(nc, &size);
    int id = add_comm(nc);
    return reply(p->id, 1, rank, size, id, NULL, 0);
}

/* The node's board in the arena's head (WIRE_ARENA_HEAD), for the player's watchdog. */
void transport_show_node(void) {
    if (!g_arena || g_arena_bytes < WIRE_ARENA_HEAD) return;
    int busy = 0;
    uint64_t ticks = pl_progress_node(&busy);
    volatile uint64_t *head = (volatile uint64_t *)g_arena;
    __atomic_store_n(&head[0], ticks, __ATOMIC_RELAXED);
    if (busy) __atomic_store_n(&head[1], __atomic_load_n(&head[1], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Complete what MPI finished and tell the player; 0 when it cannot be told (it is gone). */
int transport_progress(void) {
    size_t n = g_npend;
    if (n == 0) return 1;
    MPI_Request *reqs = malloc(n * sizeof *reqs);
    int *idx = malloc(n * sizeof *idx);
    MPI_Status *st = malloc(n * sizeof *st);
    PL_CHECK(reqs && idx && st, "out of host memory");
    for (size_t i = 0; i < n; i++) reqs[i] = g_pend[i].req;
    int outcount = 0;
    int rc = MPI_Testsome((int)n, reqs, &outcount, idx, st);
    int ok = 1;
    if (outcount != MPI_UNDEFINED && outcount > 0) pl_progress_tick();
    if (outcount != MPI_UNDEFINED) {
        for (int j = 0; j < outcount; j++) {
            pending *p = &g_pend[idx[j]];
            p->req = MPI_REQUEST_NULL;
            int err = rc == MPI_ERR_IN_STATUS ? st[j].MPI_ERROR : MPI_SUCCESS;
            int cls = MPI_SUCCESS;
            if (err != MPI_SUCCESS) MPI_Error_class(err, &cls);
            if (p->kind == XFER_SPLIT) ok &= finish_split(p);
            else ok &= reply(p->id, err == MPI_SUCCESS ? 0 : cls == MPI_ERR_TRUNCATE ? 2 : 1, 0, 0, 0, NULL, 0);
            p->kind = 0; /* done */
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (g_pend[i].kind) g_pend[k++] = g_pend[i];
        g_npend = k;
    }
    free(reqs);
    free(idx);
    free(st);
    return ok;
}
