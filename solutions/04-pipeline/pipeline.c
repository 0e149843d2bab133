/* pipeline.c - Lab 4: pipeline parallelism (reference solution).
 *
 * The schedule generators write Megatron's and the zero-bubble paper's orders directly from
 * their formulas. The executor is one routine for every schedule: it replays the whole plan
 * on a logical clock (every action one tick) and exchanges each message at the tick
 * boundary right after the action that produced it. Every rank computes the same clock,
 * so at boundary e the sender and the receiver of each message post it in the same group
 * position: the groups of boundary e only wait for each other, and the boundaries run in
 * the same order everywhere, so nothing can deadlock under rendezvous semantics, whatever
 * the schedule (1F1B's pairs come out as Megatron's send_forward_recv_backward, the
 * interleaved ones as its four-way exchanges). Messages on one pair of ranks are posted
 * in one agreed order (boundary, then kind, micro-batch, virtual stage), because point-to-
 * point matching is first in, first out per pair and an activation and a gradient have
 * the same size.
 */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

/* ==================================================================================== */
/* Configuration                                                                          */
/* ==================================================================================== */

int pp_config_check(const pp_config *c) {
    if (c->stages < 1 || c->stages > PP_MAX_STAGES || c->layers < c->stages) return PP_ERR_STAGES;
    if (c->micro < 1) return PP_ERR_MICRO;
    if (c->chunks < 1 || c->chunks > PP_MAX_CHUNKS) return PP_ERR_CHUNKS;
    if (c->chunks > 1 && c->schedule != PP_INTERLEAVED) return PP_ERR_CHUNKS;
    if (c->chunks * c->stages > c->layers) return PP_ERR_CHUNKS;
    if (c->schedule == PP_INTERLEAVED && c->micro % c->stages != 0) return PP_ERR_DIVIDE;
    return PP_OK;
}

/* ==================================================================================== */
/* Schedules                                                                              */
/* ==================================================================================== */

static void put(pp_action *out, int *n, pp_kind kind, int mb, int chunk) {
    out[(*n)++] = (pp_action){kind, mb, chunk};
}

static int check_args(int p, int s, int m, int need, int cap) {
    if (p < 1 || p > PP_MAX_STAGES || s < 0 || s >= p) return PP_ERR_STAGES;
    if (m < 1) return PP_ERR_MICRO;
    if (cap < need) return PP_ERR_CAPACITY;
    return PP_OK;
}

static int min_int(int a, int b) { return a < b ? a : b; }

int pp_schedule_gpipe(int p, int s, int m, pp_action *out, int cap) {
    int rc = check_args(p, s, m, 2 * m, cap), n = 0;
    if (rc) return rc;
    for (int i = 0; i < m; i++) put(out, &n, PP_F, i, 0);
    for (int i = 0; i < m; i++) put(out, &n, PP_B, i, 0);
    return n;
}

int pp_schedule_1f1b(int p, int s, int m, pp_action *out, int cap) {
    int rc = check_args(p, s, m, 2 * m, cap), n = 0;
    if (rc) return rc;
    int w = min_int(p - s - 1, m);
    for (int i = 0; i < w; i++) put(out, &n, PP_F, i, 0);
    for (int i = 0; i < m - w; i++) {
        put(out, &n, PP_F, w + i, 0);
        put(out, &n, PP_B, i, 0);
    }
    for (int i = m - w; i < m; i++) put(out, &n, PP_B, i, 0);
    return n;
}

/* The k-th forward (or backward) of a stage in Megatron's interleaved table. */
static pp_action interleaved_nth(int p, int v, int k, pp_kind kind) {
    int group = p * v, in_group = k % group;
    int chunk = in_group / p;
    return (pp_action){kind, (k / group) * p + k % p, kind == PP_F ? chunk : v - 1 - chunk};
}

int pp_schedule_interleaved(int p, int s, int m, int v, pp_action *out, int cap) {
    if (v < 1 || v > PP_MAX_CHUNKS) return PP_ERR_CHUNKS;
    int rc = check_args(p, s, m, 2 * m * v, cap), n = 0;
    if (rc) return rc;
    if (m % p != 0) return PP_ERR_DIVIDE;
    int total = m * v, w = min_int(2 * (p - s - 1) + (v - 1) * p, total);
    for (int k = 0; k < w; k++) out[n++] = interleaved_nth(p, v, k, PP_F);
    for (int i = 0; i < total - w; i++) {
        out[n++] = interleaved_nth(p, v, w + i, PP_F);
        out[n++] = interleaved_nth(p, v, i, PP_B);
    }
    for (int i = total - w; i < total; i++) out[n++] = interleaved_nth(p, v, i, PP_B);
    return n;
}

int pp_schedule_zbh1(int p, int s, int m, pp_action *out, int cap) {
    int rc = check_args(p, s, m, 3 * m, cap), n = 0;
    if (rc) return rc;
    int w = min_int(p - s - 1, m);
    for (int i = 0; i < w; i++) put(out, &n, PP_F, i, 0);
    for (int i = 0; i < m; i++) {
        if (i < m - w) put(out, &n, PP_F, w + i, 0);
        put(out, &n, PP_B, i, 0);
        if (i >= s) put(out, &n, PP_W, i - s, 0); /* W deferred by s backward passes */
    }
    for (int i = m - s > 0 ? m - s : 0; i < m; i++) put(out, &n, PP_W, i, 0);
    return n;
}

/* ==================================================================================== */
/* The executor's bookkeeping (host memory)                                               */
/* ==================================================================================== */

enum { MSG_ACT = 0, MSG_GRAD = 1 }; /* an activation goes to vs + 1, a gradient to vs - 1 */

/* A message is named by what made it: its kind, micro-batch and producing virtual stage. */
typedef struct {
    int kind, mb, vs;
    float *buf;
} message;

/* One exchange of the clock: at boundary `tick`, send or receive message `msg` with peer. */
typedef struct {
    int tick, send, peer;
    message msg;
} exchange;

/* A stashed micro-batch of one chunk: one activation record per block, and the head's. */
typedef struct {
    int mb;
    gpt_acts **rec;
    gpt_head_acts *head;
} stash_entry;

/* First in, first out: F pushes at `tail`; B takes from `head`. Each chunk sees m forwards,
 * so m entries never wrap. */
typedef struct {
    stash_entry *e;
    int head, tail;
} fifo;

typedef struct {
    pp_stage *st;
    const pp_plan *plan;
    const pp_batch *batch;
    int p, s, m, v, V, N, NC;
    bool split; /* the plan has W actions: B and W are separate */
    const pp_action *acts; /* this stage's list */
    int n;
    int *start; /* its actions' start ticks */
    exchange *xs;
    int nx;
    message *mailbox, *outbox; /* received and not yet used; made and not yet sent */
    int nmail, nout;
    float **free_bufs;  /* [N, C] buffers for reuse */
    int nfree, cap_bufs;
    gpt_acts **free_recs;
    int nfree_recs;
    gpt_head_acts **free_heads;
    int nfree_heads;
    fifo stash[PP_MAX_CHUNKS], awaiting_w[PP_MAX_CHUNKS];
    double loss_sum;
} executor;

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

static float *buf_get(executor *x) {
    if (x->nfree) return x->free_bufs[--x->nfree];
    return pl_malloc_floats((size_t)x->NC);
}

static void buf_put(executor *x, float *b) {
    if (x->nfree == x->cap_bufs) {
        x->cap_bufs = x->cap_bufs ? 2 * x->cap_bufs : 16;
        x->free_bufs = realloc(x->free_bufs, (size_t)x->cap_bufs * sizeof *x->free_bufs);
        PL_CHECK(x->free_bufs != NULL, "out of host memory");
    }
    x->free_bufs[x->nfree++] = b;
}

static gpt_acts *rec_get(executor *x) {
    if (x->nfree_recs) return x->free_recs[--x->nfree_recs];
    return gpt_acts_alloc(&x->st->model, x->st->cfg.recompute);
}

static void rec_put(executor *x, gpt_acts *a) { x->free_recs[x->nfree_recs++] = a; }

static gpt_head_acts *head_get(executor *x) {
    if (x->nfree_heads) return x->free_heads[--x->nfree_heads];
    return gpt_head_acts_alloc(&x->st->model);
}

/* Messages wait in a small unordered list: at most a few are ever in flight. */
static void msg_add(message **list, int *n, message msg) {
    *list = realloc(*list, (size_t)(*n + 1) * sizeof **list);
    PL_CHECK(*list != NULL, "out of host memory");
    (*list)[(*n)++] = msg;
}

static float *msg_take(message *list, int *n, int kind, int mb, int vs) {
    for (int i = 0; i < *n; i++)
        if (list[i].kind == kind && list[i].mb == mb && list[i].vs == vs) {
            float *b = list[i].buf;
            list[i] = list[--*n];
            return b;
        }
    pl_fatal(__FILE__, __LINE__, "msg_take", "a message the clock promised never arrived");
}

static int dest_stage(const executor *x, int kind, int vs) { return (kind == MSG_ACT ? vs + 1 : vs - 1) % x->p; }

/* A finished output: kept locally when it stays on this rank (p = 1), else sent later. */
static void deliver(executor *x, int kind, int mb, int vs, float *buf) {
    message msg = {kind, mb, vs, buf};
    if (dest_stage(x, kind, vs) == x->s) msg_add(&x->mailbox, &x->nmail, msg);
    else msg_add(&x->outbox, &x->nout, msg);
}

/* ==================================================================================== */
/* The plan: checked, then replayed on the logical clock                                  */
/* ==================================================================================== */

/* Every action in range and once; per stage m*v F's and B's, and W's on all or none. */
static bool plan_valid(const executor *x) {
    const pp_plan *pl = x->plan;
    if (pl->stages != x->p) return false;
    int per = x->m * x->v, w_all = -1;
    char *seen = xcalloc((size_t)3 * x->V * x->m, 1);
    bool ok = true;
    for (int r = 0; r < x->p && ok; r++) {
        int cnt[3] = {0, 0, 0};
        if (pl->count[r] < 0 || (pl->count[r] > 0 && !pl->acts[r])) ok = false;
        for (int i = 0; ok && i < pl->count[r]; i++) {
            pp_action a = pl->acts[r][i];
            if (a.kind < PP_F || a.kind > PP_W || a.mb < 0 || a.mb >= x->m || a.chunk < 0 || a.chunk >= x->v) {
                ok = false;
                break;
            }
            size_t k = ((size_t)a.kind * x->V + (size_t)(a.chunk * x->p + r)) * x->m + (size_t)a.mb;
            if (seen[k]++) ok = false;
            cnt[a.kind]++;
        }
        if (ok && (cnt[PP_F] != per || cnt[PP_B] != per || (cnt[PP_W] != 0 && cnt[PP_W] != per))) ok = false;
        if (ok && w_all >= 0 && (cnt[PP_W] > 0) != w_all) ok = false;
        w_all = cnt[PP_W] > 0;
    }
    free(seen);
    return ok;
}

/* Every action takes one tick and starts when its stage is free and its inputs exist:
 * F(vs) after F(vs - 1); B(vs) after its F and B(vs + 1); W after its B. Fills the start
 * tick of every action of every stage (starts[r][i]); false if some action never runs. */
static bool replay_clock(const executor *x, int **starts) {
    const pp_plan *pl = x->plan;
    int p = x->p, V = x->V, m = x->m;
    int *end = xcalloc((size_t)3 * V * m, sizeof *end); /* end tick, 0 = not yet */
    int *pos = xcalloc((size_t)p, sizeof *pos), *free_at = xcalloc((size_t)p, sizeof *free_at);
#define END(kind, vs, mb) end[((size_t)(kind) * V + (size_t)(vs)) * m + (size_t)(mb)]
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < p; r++)
            for (; pos[r] < pl->count[r]; pos[r]++) {
                pp_action a = pl->acts[r][pos[r]];
                int vs = a.chunk * p + r, t = free_at[r];
                int deps[2] = {0, 0}, nd = 0;
                if (a.kind == PP_F && vs > 0) deps[nd++] = END(PP_F, vs - 1, a.mb);
                if (a.kind == PP_B) {
                    deps[nd++] = END(PP_F, vs, a.mb);
                    if (vs < V - 1) deps[nd++] = END(PP_B, vs + 1, a.mb);
                }
                if (a.kind == PP_W) deps[nd++] = END(PP_B, vs, a.mb);
                bool ready = true;
                for (int d = 0; d < nd; d++) {
                    if (!deps[d]) ready = false;
                    if (deps[d] > t) t = deps[d];
                }
                if (!ready) break;
                starts[r][pos[r]] = t;
                END(a.kind, vs, a.mb) = t + 1;
                free_at[r] = t + 1;
                moved = true;
            }
    }
#undef END
    bool done = true;
    for (int r = 0; r < p; r++) done &= pos[r] == pl->count[r];
    free(end), free(pos), free(free_at);
    return done;
}

static int cmp_exchange(const void *pa, const void *pb) {
    const exchange *a = pa, *b = pb;
    int ka[4] = {a->tick, a->msg.kind, a->msg.mb, a->msg.vs}, kb[4] = {b->tick, b->msg.kind, b->msg.mb, b->msg.vs};
    for (int i = 0; i < 4; i++)
        if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return 0;
}

/* This stage's exchanges: each message between two ranks at the boundary after the tick
 * of the action that made it, sorted into the order both ends agree on. */
static void plan_exchanges(executor *x, int **starts) {
    const pp_plan *pl = x->plan;
    int cap = 0;
    for (int r = 0; r < x->p; r++) cap += pl->count[r];
    x->xs = xcalloc((size_t)cap, sizeof *x->xs);
    for (int r = 0; r < x->p; r++)
        for (int i = 0; i < pl->count[r]; i++) {
            pp_action a = pl->acts[r][i];
            int vs = a.chunk * x->p + r, kind;
            if (a.kind == PP_F && vs < x->V - 1) kind = MSG_ACT;
            else if (a.kind == PP_B && vs > 0) kind = MSG_GRAD;
            else continue;
            int to = dest_stage(x, kind, vs);
            if (to == r || (r != x->s && to != x->s)) continue; /* local, or not ours */
            x->xs[x->nx++] = (exchange){starts[r][i] + 1, r == x->s, r == x->s ? to : r, {kind, a.mb, vs, NULL}};
        }
    qsort(x->xs, (size_t)x->nx, sizeof *x->xs, cmp_exchange);
}

/* One boundary: every send and receive of this tick in one group. */
static int run_boundary(executor *x, int from) {
    int tick = x->xs[from].tick, to = from;
    float *sent[2 * PP_MAX_CHUNKS + 8];
    int nsent = 0;
    pl_group_start();
    for (; to < x->nx && x->xs[to].tick == tick; to++) {
        exchange *e = &x->xs[to];
        if (e->send) {
            float *b = msg_take(x->outbox, &x->nout, e->msg.kind, e->msg.mb, e->msg.vs);
            pl_send(b, (size_t)x->NC, e->peer, x->st->comm, NULL);
            PL_CHECK(nsent < (int)(sizeof sent / sizeof sent[0]), "too many sends at one tick");
            sent[nsent++] = b;
        } else {
            message msg = e->msg;
            msg.buf = buf_get(x);
            pl_recv(msg.buf, (size_t)x->NC, e->peer, x->st->comm, NULL);
            msg_add(&x->mailbox, &x->nmail, msg);
        }
    }
    pl_group_end();
    for (int i = 0; i < nsent; i++) buf_put(x, sent[i]); /* complete once the group ends */
    return to;
}

/* ==================================================================================== */
/* The actions                                                                            */
/* ==================================================================================== */

static void forward(executor *x, int mb, int k) {
    pp_stage *st = x->st;
    pp_chunk *ch = &st->chunk[k];
    int vs = k * x->p + x->s, Tb = st->model.seq * st->model.batch;
    float *cur;
    if (vs == 0) {
        cur = buf_get(x);
        gpt_embed_forward(&st->model, &st->embed, cur, x->batch->tokens + (size_t)mb * Tb, NULL);
    } else {
        cur = msg_take(x->mailbox, &x->nmail, MSG_ACT, mb, vs - 1);
    }
    fifo *q = &x->stash[k];
    stash_entry *e = &q->e[q->tail++];
    e->mb = mb;
    for (int l = 0; l < ch->count; l++) {
        e->rec[l] = rec_get(x);
        gpt_block_forward(&ch->params[l], e->rec[l], cur, cur, st->ws, NULL); /* in place */
    }
    if (vs == x->V - 1) {
        e->head = head_get(x);
        x->loss_sum += gpt_head_forward(&st->head, e->head, cur, x->batch->targets + (size_t)mb * Tb, st->ws, NULL);
        buf_put(x, cur);
    } else {
        deliver(x, MSG_ACT, mb, vs, cur);
    }
}

static void backward(executor *x, int mb, int k) {
    pp_stage *st = x->st;
    pp_chunk *ch = &st->chunk[k];
    int vs = k * x->p + x->s, Tb = st->model.seq * st->model.batch;
    fifo *q = &x->stash[k];
    stash_entry *e = &q->e[q->head++]; /* the oldest micro-batch of the chunk */
    float *dy;
    if (vs == x->V - 1) {
        dy = buf_get(x);
        gpt_head_backward(&st->head, &st->dhead, e->head, dy, 1.0f / (float)x->m, st->ws, NULL);
        x->free_heads[x->nfree_heads++] = e->head;
        e->head = NULL;
    } else {
        dy = msg_take(x->mailbox, &x->nmail, MSG_GRAD, mb, vs + 1);
    }
    float *dx = buf_get(x);
    for (int l = ch->count - 1; l >= 0; l--) {
        if (x->split) {
            gpt_block_backward_input(&ch->params[l], e->rec[l], dx, dy, st->ws, NULL);
        } else {
            gpt_block_backward(&ch->params[l], &ch->grads[l], e->rec[l], dx, dy, st->ws, NULL);
            rec_put(x, e->rec[l]);
        }
        float *t = dx;
        dx = dy, dy = t; /* dy now holds this block's input gradient */
    }
    buf_put(x, dx);
    if (vs == 0) {
        gpt_embed_backward(&st->model, &st->dembed, dy, x->batch->tokens + (size_t)mb * Tb, NULL);
        buf_put(x, dy);
    } else {
        deliver(x, MSG_GRAD, mb, vs, dy);
    }
    if (x->split) x->awaiting_w[k].e[x->awaiting_w[k].tail++] = *e;
}

static void weight(executor *x, int k) {
    pp_chunk *ch = &x->st->chunk[k];
    fifo *q = &x->awaiting_w[k];
    stash_entry *e = &q->e[q->head++];
    for (int l = ch->count - 1; l >= 0; l--) {
        gpt_block_backward_weight(&ch->params[l], &ch->grads[l], e->rec[l], x->st->ws, NULL);
        rec_put(x, e->rec[l]);
    }
}

/* ==================================================================================== */
/* One step                                                                               */
/* ==================================================================================== */

static void zero_grads(pp_stage *st) {
    for (int k = 0; k < st->cfg.chunks; k++)
        for (int l = 0; l < st->chunk[k].count; l++) pl_fill(st->chunk[k].grads[l].base, 0.0f, st->chunk[k].grads[l].count, NULL);
    if (st->has_embed) pl_fill(st->dembed.base, 0.0f, st->dembed.count, NULL);
    if (st->has_head) pl_fill(st->dhead.base, 0.0f, st->dhead.count, NULL);
}

static void sgd_step(pp_stage *st) {
    for (int k = 0; k < st->cfg.chunks; k++)
        for (int l = 0; l < st->chunk[k].count; l++)
            gpt_sgd_step(st->chunk[k].params[l].base, st->chunk[k].grads[l].base, st->chunk[k].params[l].count, st->lr, NULL);
    if (st->has_embed) gpt_sgd_step(st->embed.base, st->dembed.base, st->embed.count, st->lr, NULL);
    if (st->has_head) gpt_sgd_step(st->head.base, st->dhead.base, st->head.count, st->lr, NULL);
}

static void run_action(executor *x, pp_action a) {
    if (a.kind == PP_F) forward(x, a.mb, a.chunk);
    else if (a.kind == PP_B) backward(x, a.mb, a.chunk);
    else weight(x, a.chunk);
}

/* The plan checked and replayed on the clock, this stage's exchanges, the stash queues.
 * PP_ERR_PLAN (on every rank alike: they all replay the same plan) before any message. */
static int executor_init(executor *x, pp_stage *st, const pp_plan *plan, const pp_batch *batch) {
    *x = (executor){.st = st, .plan = plan, .batch = batch, .p = st->cfg.stages, .s = st->stage,
                    .m = st->cfg.micro, .v = st->cfg.chunks};
    x->V = x->p * x->v;
    x->N = st->model.seq * st->model.batch;
    x->NC = x->N * st->model.hidden;
    if (!plan_valid(x)) return PP_ERR_PLAN;
    int **starts = xcalloc((size_t)x->p, sizeof *starts);
    for (int r = 0; r < x->p; r++) starts[r] = xcalloc((size_t)plan->count[r] + 1, sizeof **starts);
    bool runs = replay_clock(x, starts);
    if (runs) plan_exchanges(x, starts);
    x->start = starts[x->s];
    for (int r = 0; r < x->p; r++)
        if (r != x->s) free(starts[r]);
    free(starts);
    if (!runs) {
        free(x->start);
        return PP_ERR_PLAN;
    }
    x->acts = plan->acts[x->s];
    x->n = plan->count[x->s];
    int blocks = 0;
    for (int i = 0; i < x->n; i++) x->split |= x->acts[i].kind == PP_W;
    for (int k = 0; k < x->v; k++) {
        blocks += st->chunk[k].count;
        x->stash[k].e = xcalloc((size_t)x->m, sizeof(stash_entry));
        x->awaiting_w[k].e = xcalloc((size_t)x->m, sizeof(stash_entry));
        for (int i = 0; i < x->m; i++) x->stash[k].e[i].rec = xcalloc((size_t)st->chunk[k].count, sizeof(gpt_acts *));
    }
    x->free_recs = xcalloc((size_t)blocks * x->m, sizeof *x->free_recs);
    x->free_heads = xcalloc((size_t)x->m, sizeof *x->free_heads);
    return PP_OK;
}

static void executor_free(executor *x) {
    for (int i = 0; i < x->nmail; i++) buf_put(x, x->mailbox[i].buf);
    for (int i = 0; i < x->nout; i++) buf_put(x, x->outbox[i].buf);
    for (int i = 0; i < x->nfree; i++) pl_free(x->free_bufs[i]);
    for (int i = 0; i < x->nfree_recs; i++) gpt_acts_free(x->free_recs[i]);
    for (int i = 0; i < x->nfree_heads; i++) gpt_head_acts_free(x->free_heads[i]);
    for (int k = 0; k < x->v; k++) {
        for (int i = 0; i < x->m; i++) free(x->stash[k].e[i].rec);
        free(x->stash[k].e);
        free(x->awaiting_w[k].e);
    }
    free(x->mailbox), free(x->outbox), free(x->free_bufs), free(x->free_recs), free(x->free_heads);
    free(x->xs), free(x->start);
}

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    executor x;
    *loss = 0.0;
    int rc = executor_init(&x, st, plan, batch);
    if (rc != PP_OK) return rc;
    zero_grads(st);
    int next = 0; /* the next exchange */
    for (int i = 0; i < x.n; i++) {
        while (next < x.nx && x.xs[next].tick <= x.start[i]) next = run_boundary(&x, next);
        run_action(&x, x.acts[i]);
    }
    while (next < x.nx) next = run_boundary(&x, next);
    sgd_step(st);
    if (st->has_head) *loss = x.loss_sum / x.m;
    executor_free(&x);
    return PP_OK;
}
