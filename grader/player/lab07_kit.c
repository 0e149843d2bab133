/* lab07_kit.c (player) - the player's side of Lab 7's training runs: the GPT of
 * models/gpt.h on the device, driven unit by unit through the student's hooks, from the
 * referee's inputs in the slots (initial parameters, this rank's sequences) to the slots
 * (losses, what the harness counted and recorded in each step, the pieces and every unit's
 * parameters at the end). It never judges: the referee's checks read what it leaves.
 *
 * The kit's compute: with fp32 parameters it computes on the buffer the hook returns and
 * writes the gradient into the hook's buffer (zeroed, then accumulated by the model); with
 * bf16 it widens the parameters into an fp32 copy of its own, computes, and rounds the fp32
 * gradient into the hook's bf16 buffer. A NULL buffer from a hook is reported and the step
 * goes on without compute, every hook still called, so the ranks stay in step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_play.h"
#include "pl_memtag_internal.h" // defines: pl_mem_tag_peak, pl_mem_tag_reset_peaks

_Static_assert(L7_MAX_UNITS == ZERO_MAX_UNITS && L7_MAX_TENSORS == ZERO_MAX_TENSORS &&
                   L7_MAX_BUCKETS == ZERO_MAX_BUCKETS, "the driver's limits and zero.h's differ");
_Static_assert((int)L7_OK == (int)ZERO_OK && (int)L7_ERR_ARG == (int)ZERO_ERR_ARG &&
                   (int)L7_ERR_CAPACITY == (int)ZERO_ERR_CAPACITY && (int)L7_ERR_COVERAGE == (int)ZERO_ERR_COVERAGE &&
                   (int)L7_ERR_TODO == (int)ZERO_ERR_TODO,
               "the driver's return codes and zero.h's differ");
_Static_assert(L7_FP32 == (int)ZERO_FP32 && L7_BF16 == (int)ZERO_BF16, "the driver's dtypes and zero.h's differ");
#define SAME_LAYOUT(a, b) (sizeof(a) == sizeof(b) && _Alignof(a) == _Alignof(b))
_Static_assert(SAME_LAYOUT(l7_tensor, zero_tensor) && offsetof(l7_tensor, unit) == offsetof(zero_tensor, unit) &&
                   offsetof(l7_tensor, dim0) == offsetof(zero_tensor, dim0) &&
                   offsetof(l7_tensor, offset) == offsetof(zero_tensor, offset),
               "l7_tensor is not zero_tensor");
_Static_assert(SAME_LAYOUT(l7_unit, zero_unit) && offsetof(l7_unit, numel) == offsetof(zero_unit, numel),
               "l7_unit is not zero_unit");
_Static_assert(SAME_LAYOUT(l7_model, zero_model) && offsetof(l7_model, unit) == offsetof(zero_model, unit) &&
                   offsetof(l7_model, tensor) == offsetof(zero_model, tensor) &&
                   offsetof(l7_model, numel) == offsetof(zero_model, numel),
               "l7_model is not zero_model");
_Static_assert(SAME_LAYOUT(l7_bucket, zero_bucket) && offsetof(l7_bucket, numel) == offsetof(zero_bucket, numel) &&
                   offsetof(l7_bucket, offset) == offsetof(zero_bucket, offset),
               "l7_bucket is not zero_bucket");
_Static_assert(SAME_LAYOUT(l7_saved, zero_saved_piece) && offsetof(l7_saved, tensor) == offsetof(zero_saved_piece, tensor) &&
                   offsetof(l7_saved, begin) == offsetof(zero_saved_piece, begin) &&
                   offsetof(l7_saved, count) == offsetof(zero_saved_piece, count),
               "l7_saved is not zero_saved_piece");
_Static_assert(SAME_LAYOUT(l7_read, zero_read) && offsetof(l7_read, dst_offset) == offsetof(zero_read, dst_offset) &&
                   offsetof(l7_read, saved) == offsetof(zero_read, saved) &&
                   offsetof(l7_read, src_offset) == offsetof(zero_read, src_offset) &&
                   offsetof(l7_read, count) == offsetof(zero_read, count),
               "l7_read is not zero_read");

void l7_zero_model(zero_model *out, const l7_model *m) { memcpy(out, m, sizeof *out); }

zero_config l7_zero_config(const l7_cfg *c) {
    return (zero_config){.stage = c->stage, .reshard_after_forward = c->reshard != 0,
                         .param_dtype = c->param == L7_BF16 ? ZERO_BF16 : ZERO_FP32,
                         .reduce_dtype = c->reduce == L7_BF16 ? ZERO_BF16 : ZERO_FP32, .bucket_cap = c->cap,
                         .lr = c->lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps, .weight_decay = c->wd,
                         .max_norm = c->max_norm};
}

/* ==================================================================================== */
/* The kit's model                                                                       */
/* ==================================================================================== */

struct l7_kit {
    gpt_config mc;
    const zero_model *m;
    zero_dtype dtype;
    int layers;
    gpt_acts **acts;
    gpt_head_acts *ha;
    gpt_workspace *ws;
    float *x, *dx, *dy;
    int *tok, *tgt;
    float *pw, *gw;          /* bf16: the fp32 parameters and gradient of one unit    */
};

l7_kit *l7_kit_new(const gpt_config *mc, const zero_model *m, zero_dtype dtype) {
    l7_kit *k = calloc(1, sizeof *k);
    PL_CHECK(k != NULL, "out of host memory");
    k->mc = *mc, k->m = m, k->dtype = dtype, k->layers = m->nunits - 2;
    k->acts = calloc((size_t)k->layers + 1, sizeof *k->acts);
    PL_CHECK(k->acts != NULL, "out of host memory");
    for (int l = 0; l < k->layers; l++) k->acts[l] = gpt_acts_alloc(mc, false);
    k->ha = gpt_head_acts_alloc(mc);
    k->ws = gpt_workspace_alloc(mc, GPT_WS_HEAD);
    size_t NC = (size_t)mc->seq * mc->batch * mc->hidden, N = (size_t)mc->seq * mc->batch, maxn = 0;
    k->x = pl_malloc_floats(NC), k->dx = pl_malloc_floats(NC), k->dy = pl_malloc_floats(NC);
    k->tok = pl_malloc(N * sizeof(int)), k->tgt = pl_malloc(N * sizeof(int));
    for (int u = 0; u < m->nunits; u++) maxn = m->unit[u].numel > maxn ? m->unit[u].numel : maxn;
    if (dtype == ZERO_BF16) k->pw = pl_malloc_floats(maxn), k->gw = pl_malloc_floats(maxn);
    return k;
}

void l7_kit_free(l7_kit *k) {
    if (!k) return;
    for (int l = 0; l < k->layers; l++) gpt_acts_free(k->acts[l]);
    free(k->acts);
    gpt_head_acts_free(k->ha);
    gpt_workspace_free(k->ws);
    float *b[] = {k->x, k->dx, k->dy, k->pw, k->gw};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) pl_free(b[i]);
    pl_free(k->tok), pl_free(k->tgt);
    free(k);
}

/* Parameter struct views over a unit's full buffer (storage order). */
static void bind(float **t, float **base, size_t *count, float *buf, const zero_model *m, int u) {
    for (int i = 0; i < m->unit[u].count; i++) t[i] = buf + m->tensor[m->unit[u].first + i].offset;
    *base = buf;
    *count = m->unit[u].numel;
}

/* What the model computes with: the hook's buffer, or its fp32 widening. */
static float *compute_params(l7_kit *k, int u, const void *p) {
    if (k->dtype == ZERO_FP32) return (float *)p;
    kern_bf16_to_f32(k->pw, p, k->m->unit[u].numel, NULL);
    return k->pw;
}

static double unit_forward(l7_kit *k, int u, float *p) {
    const zero_model *m = k->m;
    int U = m->nunits;
    if (u == 0) {
        gpt_embed_params e;
        bind(e.t, &e.base, &e.count, p, m, u);
        gpt_embed_forward(&k->mc, &e, k->x, k->tok, NULL);
    } else if (u == U - 1) {
        gpt_head_params h;
        bind(h.t, &h.base, &h.count, p, m, u);
        return gpt_head_forward(&h, k->ha, k->x, k->tgt, k->ws, NULL);
    } else {
        gpt_block_params b;
        bind(b.t, &b.base, &b.count, p, m, u);
        gpt_block_forward(&b, k->acts[u - 1], k->x, k->x, k->ws, NULL);
    }
    return 0;
}

/* Unit u's backward: its gradient written into g (param dtype), dx handed down in dy. */
static void unit_backward(l7_kit *k, int u, float *p, void *g) {
    const zero_model *m = k->m;
    int U = m->nunits;
    size_t n = m->unit[u].numel;
    float *gf = k->dtype == ZERO_FP32 ? (float *)g : k->gw;
    pl_fill(gf, 0.0f, n, NULL);
    if (u == U - 1) {
        gpt_head_params h, dh;
        bind(h.t, &h.base, &h.count, p, m, u);
        bind(dh.t, &dh.base, &dh.count, gf, m, u);
        gpt_head_backward(&h, &dh, k->ha, k->dy, 1.0f, k->ws, NULL);
    } else if (u == 0) {
        gpt_embed_params de;
        bind(de.t, &de.base, &de.count, gf, m, u);
        gpt_embed_backward(&k->mc, &de, k->dy, k->tok, NULL);
    } else {
        gpt_block_params b, db;
        bind(b.t, &b.base, &b.count, p, m, u);
        bind(db.t, &db.base, &db.count, gf, m, u);
        gpt_block_backward(&b, &db, k->acts[u - 1], k->dx, k->dy, k->ws, NULL);
        float *t = k->dx;
        k->dx = k->dy, k->dy = t;
    }
    if (k->dtype == ZERO_BF16) kern_bf16_from_f32(g, gf, n, NULL);
}

/* ==================================================================================== */
/* One step, recorded                                                                    */
/* ==================================================================================== */

static const void *s_pre_forward(void *z, int u) { return zero_pre_forward(z, u); }
static void s_post_forward(void *z, int u) { zero_post_forward(z, u); }
static const void *s_pre_backward(void *z, int u, void **g) { return zero_pre_backward(z, u, g); }
static void s_post_backward(void *z, int u) { zero_post_backward(z, u); }
static void s_step(void *z) { zero_step(z); }
const l7_hooks L7_STUDENT_HOOKS = {s_pre_forward, s_post_forward, s_pre_backward, s_post_backward, s_step};

static int at_now(void) { return (int)pl_trace_count(); }

/* The collectives of the step by kind, the order of gathers and reduces, and the share of
 * all-gather time during which this rank's compute stream was busy. */
static void scan(l7_step *r) {
    const pl_trace_event *ev = pl_trace_events();
    size_t n = pl_trace_count();
    double ag_total = 0, ag_beside = 0;
    for (size_t i = 0; i < n; i++) {
        const pl_trace_event *e = &ev[i];
        if (e->kind == PL_OP_REGION || e->kind == PL_OP_GEMM || e->kind == PL_OP_KERNEL) continue;
        r->calls[e->kind]++, r->bytes[e->kind] += e->bytes;
        if (e->kind == PL_OP_ALLGATHER && r->nag < (int)(sizeof r->ag_at / sizeof r->ag_at[0])) r->ag_at[r->nag++] = (int)i;
        if (e->kind == PL_OP_REDUCE_SCATTER && r->nrs < (int)(sizeof r->rs_at / sizeof r->rs_at[0])) r->rs_at[r->nrs++] = (int)i;
        if (e->kind != PL_OP_ALLGATHER) continue;
        double s = e->t_start, t = e->t_end > s ? e->t_end : s;
        ag_total += t - s;
        for (size_t j = 0; j < n; j++) {
            const pl_trace_event *c = &ev[j];
            if (c->stream != 0 || (c->kind != PL_OP_GEMM && c->kind != PL_OP_KERNEL)) continue;
            double lo = c->t_start > s ? c->t_start : s, hi = c->t_end < t ? c->t_end : t;
            if (hi > lo) ag_beside += hi - lo;
        }
    }
    r->ag_overlap = ag_total > 0 ? fmin(1.0, ag_beside / ag_total) : 0;
    /* backward's reduce-scatters: on which stream, and whether the compute op issued next
     * waits for one (`after`: the other stream's op it follows). A slot's reuse waits for
     * an older reduce-scatter, with compute issued in between; a wait at issue does not. */
    int64_t unwaited = -1; /* the reduce-scatter no compute op was issued after yet */
    for (size_t i = 0; i < n && (int64_t)i < r->bwd_end; i++) {
        const pl_trace_event *e = &ev[i];
        if (e->kind == PL_OP_REDUCE_SCATTER) {
            if (e->stream != 1) r->rs_off_comm++;
            unwaited = (int64_t)i;
        } else if (e->stream == 0 && (e->kind == PL_OP_GEMM || e->kind == PL_OP_KERNEL)) {
            if (unwaited >= 0 && e->after == unwaited) r->rs_waited++;
            unwaited = -1;
        }
    }
}

double l7_kit_step(l7_kit *k, const l7_hooks *h, void *z, const int *tokens, const int *targets, l7_step *rec,
                   char *why, size_t whylen) {
    const zero_model *m = k->m;
    int U = m->nunits;
    size_t N = (size_t)k->mc.seq * k->mc.batch;
    pl_upload(k->tok, tokens, N * sizeof(int));
    pl_upload(k->tgt, targets, N * sizeof(int));
    pl_wire w0;
    if (rec) {
        memset(rec, 0, sizeof *rec);
        pl_device_sync();
        pl_trace_clear();
        pl_mem_tag_reset_peaks();
        pl_wire_get(&w0);
    }
    bool dry = false;
    double loss = 0;
    for (int u = 0; u < U; u++) {
        if (rec) rec->fwd_call[u] = at_now();
        const void *p = h->pre_forward(z, u);
        if (!p && !dry && why && !why[0]) snprintf(why, whylen, "zero_pre_forward(z, %d) returned NULL", u);
        dry = dry || !p;
        if (rec) rec->fwd_start[u] = at_now();
        if (!dry) {
            double l = unit_forward(k, u, compute_params(k, u, p));
            if (u == U - 1) loss = l;
        }
        h->post_forward(z, u);
    }
    if (rec) rec->fwd_end = at_now();
    for (int u = U - 1; u >= 0; u--) {
        if (rec) rec->bwd_call[u] = at_now();
        void *g = NULL;
        const void *p = h->pre_backward(z, u, &g);
        if ((!p || !g) && !dry && why && !why[0])
            snprintf(why, whylen, "zero_pre_backward(z, %d) returned %s", u, !p ? "NULL parameters" : "a NULL gradient buffer");
        dry = dry || !p || !g;
        if (rec) rec->bwd_start[u] = at_now();
        if (!dry) unit_backward(k, u, compute_params(k, u, p), g);
        h->post_backward(z, u);
    }
    if (rec) rec->bwd_end = at_now();
    h->step(z);
    pl_device_sync();
    if (dry) /* the forward's records may wait for a backward that never came */
        for (int l = 0; l < k->layers; l++) gpt_acts_reset(k->acts[l]);
    if (rec) {
        rec->loss = loss;
        pl_wire w1;
        pl_wire_get(&w1);
        rec->wire_calls = w1.coll_calls - w0.coll_calls, rec->wire_bytes = w1.coll_bytes - w0.coll_bytes;
        for (int t = 0; t < PL_MEM_NTAGS; t++) rec->peak[t] = pl_mem_tag_peak((pl_mem_tag)t);
        scan(rec);
    }
    return loss;
}


/* ==================================================================================== */
/* A run                                                                                 */
/* ==================================================================================== */

struct l7_session {
    l7_kit *kit;
    zero_model m;            /* z->model points here                                  */
    zero_state z;
    pl_comm *comm;
    int stage;
    size_t n;                /* T * b                                                 */
};

l7_session *l7_session_start(const l7_run_in *in, const float *init, pl_comm *comm, l7_record *rec) {
    l7_session *s = calloc(1, sizeof *s);
    PL_CHECK(s != NULL, "out of host memory");
    gpt_config mc = {.seq = in->seq, .batch = in->batch, .hidden = in->hidden, .heads = in->heads, .ffn = in->ffn,
                     .vocab = in->vocab, .max_pos = in->seq};
    l7_model *lm = malloc(sizeof *lm);
    PL_CHECK(lm != NULL, "out of host memory");
    l7_describe(lm, &mc, in->layers);
    l7_zero_model(&s->m, lm);
    free(lm);
    zero_config cfg = l7_zero_config(&in->cfg);
    s->comm = comm, s->stage = in->cfg.stage, s->n = (size_t)in->seq * in->batch;
    s->kit = l7_kit_new(&mc, &s->m, cfg.param_dtype);
    float *dev[ZERO_MAX_UNITS];
    size_t at = 0;
    for (int u = 0; u < s->m.nunits; u++) {
        dev[u] = pl_malloc_floats(s->m.unit[u].numel);
        pl_upload(dev[u], init + at, s->m.unit[u].numel * sizeof(float));
        at += s->m.unit[u].numel;
    }
    pl_device_sync();
    size_t before = pl_mem_tag_in_use(PL_MEM_UNTAGGED);
    zero_init(&s->z, &s->m, &cfg, comm, dev);
    pl_device_sync();
    for (int t = 0; t < PL_MEM_NTAGS; t++) rec->mem_init[t] = pl_mem_tag_in_use((pl_mem_tag)t);
    size_t after = pl_mem_tag_in_use(PL_MEM_UNTAGGED);
    rec->untagged_init = after > before ? after - before : 0;
    for (int u = 0; u < s->m.nunits; u++) pl_free(dev[u]);
    int nb = s->z.nbuckets < 0 ? 0 : s->z.nbuckets > ZERO_MAX_BUCKETS ? ZERO_MAX_BUCKETS : s->z.nbuckets;
    rec->nbuckets = nb;
    memcpy(rec->bucket, s->z.bucket, (size_t)nb * sizeof rec->bucket[0]);
    return s;
}

zero_state *l7_session_state(l7_session *s) { return &s->z; }

/* The step just recorded, as ops for the referee's replay: every trace event's op index. */
static void keep_ops(l7_ops *ops, int rank) {
    size_t n = pl_trace_count();
    const pl_trace_event *ev = pl_trace_events();
    ops->nops = ops->ntrace = 0;
    if (n > L7_MAX_TRACE) return; /* too long to replay: the referee replays nothing */
    int w = 0;
    for (size_t i = 0; i < n; i++) ops->op_of[i] = ev[i].kind == PL_OP_REGION ? -1 : w++;
    if (w > L7_MAX_OPS) return;
    ops->nops = (int32_t)plc_ops_from_trace(0, rank, ops->op, L7_MAX_OPS);
    ops->ntrace = (int32_t)n;
}

/* mark: each step is a phase the referees count (drv_mark, its step number), where they
 * move the messages. */
void l7_session_steps(l7_session *s, const int *tok, const int *tgt, int count, l7_record *rec, l7_ops *ops, bool mark) {
    for (int i = 0; i < count && rec->nsteps < L7_MAX_STEPS; i++) {
        l7_step *st = &rec->step[rec->nsteps];
        if (mark) drv_mark(rec->nsteps, false);
        l7_kit_step(s->kit, &L7_STUDENT_HOOKS, &s->z, tok + (size_t)i * s->n, tgt + (size_t)i * s->n, st, rec->why,
                    sizeof rec->why);
        if (mark) drv_mark(rec->nsteps, true);
        if (ops && s->stage == 3 && i == count - 1) keep_ops(ops, pl_comm_rank(s->comm));
        rec->nsteps++;
    }
}

size_t l7_session_masters(l7_session *s, float *out, size_t cap) {
    zero_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
    PL_CHECK(pc != NULL, "out of host memory");
    int np = zero_pieces(&s->z, pc, L7_MAX_PIECES);
    size_t total = 0;
    for (int j = 0; j < np && j < L7_MAX_PIECES; j++) {
        if (!pc[j].master || pc[j].count > cap - total) break;
        pl_download(out + total, pc[j].master, pc[j].count * 4);
        total += pc[j].count;
    }
    free(pc);
    return total;
}

/* The pieces and their values, every unit's parameters as the hook gives them. */
static void final_state(l7_session *s, l7_record *rec, float *vals, float *full) {
    const zero_model *m = &s->m;
    zero_state *z = &s->z;
    size_t psi = m->numel;
    rec->zstep = z->step;
    zero_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
    PL_CHECK(pc != NULL, "out of host memory");
    int np = zero_pieces(z, pc, L7_MAX_PIECES);
    rec->npieces = np;
    size_t total = 0;
    for (int j = 0; j < np; j++) {
        const zero_piece *p = &pc[j];
        if (p->tensor < 0 || p->tensor >= m->ntensors || p->count > m->tensor[p->tensor].numel ||
            p->begin > m->tensor[p->tensor].numel - p->count || !p->master || !p->m || !p->v) {
            if (!rec->why[0]) snprintf(rec->why, sizeof rec->why, "zero_pieces: piece %d is not a slice of a tensor with three buffers", j);
            rec->npieces = 0;
            break;
        }
        total += p->count;
    }
    total = 0;
    for (int j = 0; j < rec->npieces; j++) rec->piece[j] = (l7_piece){.tensor = pc[j].tensor, .begin = pc[j].begin, .count = pc[j].count};
    for (int j = 0; j < rec->npieces; j++) {
        const zero_piece *p = &pc[j];
        if (p->count > psi - total) break; /* more than the model holds: the referee sees it in the pieces */
        pl_download(vals + total, p->master, p->count * 4);
        pl_download(vals + psi + total, p->m, p->count * 4);
        pl_download(vals + 2 * psi + total, p->v, p->count * 4);
        total += p->count;
    }
    rec->nvalues = total;
    free(pc);
    size_t es = z->cfg.param_dtype == ZERO_BF16 ? 2 : 4, at = 0;
    uint16_t *h = es == 2 ? malloc(psi * 2 + 2) : NULL;
    PL_CHECK(es == 4 || h != NULL, "out of host memory");
    for (int u = 0; u < m->nunits; u++) {
        size_t n = m->unit[u].numel;
        const void *p = zero_pre_forward(z, u);
        if (p) {
            pl_download(es == 2 ? (void *)h : (void *)(full + at), p, n * es);
            for (size_t i = 0; h && i < n; i++) full[at + i] = pl_bf16_to_float(h[i]);
        } else {
            memset(full + at, 0, n * sizeof(float));
            if (!rec->why[0]) snprintf(rec->why, sizeof rec->why, "zero_pre_forward(z, %d) returned NULL", u);
        }
        zero_post_forward(z, u);
        at += n;
    }
    free(h);
    pl_device_sync();
}

void l7_session_finish(l7_session *s, l7_record *rec, float *vals, float *full) {
    final_state(s, rec, vals, full);
    zero_free(&s->z);
    pl_device_sync();
    for (int t = 0; t < PL_MEM_NTAGS; t++) rec->mem_end[t] = pl_mem_tag_in_use((pl_mem_tag)t);
    l7_kit_free(s->kit);
    free(s);
}

void l7_session_drop(l7_session *s) {
    zero_free(&s->z);
    pl_device_sync();
    l7_kit_free(s->kit);
    free(s);
}
