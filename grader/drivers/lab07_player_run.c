/* lab07_player_run.c - the player's side of Lab 7's training runs: the GPT of models/gpt.h
 * on the device, driven unit by unit through the student's hooks, from the referee's host
 * inputs (initial parameters, this rank's sequences) to host outputs (losses, what the
 * harness counted and recorded in each step, the pieces and every unit's parameters at the
 * end). It never judges: the referee's checks read what it returns.
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

#include "lab07.h"
#include "pl_memtag_internal.h" // defines: pl_mem_tag_peak, pl_mem_tag_reset_peaks

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
}

/* The step as it would run without prefetch: each all-gather moved, in its rank's list, to
 * right after the last compute op issued before its unit's hook was called, and made to
 * wait for it. Returns the new list (every `after` renumbered). */
static plc_op *without_prefetch(const l7_step *r, const zero_model *m, const plc_op *ops, size_t nops, const int *op_of,
                                const pl_trace_event *ev) {
    int U = m->nunits, nf = 0;
    int *move_after = malloc((nops + 1) * sizeof *move_after), *newidx = malloc((nops + 1) * sizeof *newidx);
    plc_op *out = malloc((nops + 1) * sizeof *out);
    PL_CHECK(move_after && newidx && out, "out of host memory");
    for (size_t i = 0; i < nops; i++) move_after[i] = -1;
    while (nf < r->nag && r->ag_at[nf] < r->fwd_end) nf++;
    for (int k = 1; k < r->nag; k++) {
        if (k == nf) continue; /* the first gather of the backward is never a prefetch */
        int unit = k < nf ? k : U - 1 - (k - nf);
        if (unit < 0 || unit >= U) continue;
        int call = k < nf ? r->fwd_call[unit] : r->bwd_call[unit], last = -1, me = op_of[r->ag_at[k]];
        for (int i = call - 1; i >= 0 && last < 0; i--)
            if (op_of[i] >= 0 && ev[i].stream == 0) last = op_of[i];
        if (me >= 0 && last > me) move_after[me] = last;
    }
    size_t w = 0;
    for (size_t i = 0; i < nops; i++) {
        if (move_after[i] < 0) newidx[i] = (int)w, out[w++] = ops[i];
        for (size_t j = 0; j < nops; j++)
            if (move_after[j] == (int)i) newidx[j] = (int)w, out[w] = ops[j], out[w++].after = (int)i + 1;
    }
    for (size_t i = 0; i < w; i++)
        if (out[i].after > 0) {
            int to = newidx[out[i].after - 1];
            out[i].after = to < (int)i ? to + 1 : 0;
        }
    free(move_after), free(newidx);
    return out;
}

/* The step replayed on the profile as recorded, and (ZeRO-3) without prefetch. */
static void replay(l7_step *r, const zero_model *m, pl_comm *comm, const plc_profile *prof) {
    size_t n = pl_trace_count();
    plc_op *ops = malloc((n + 1) * sizeof *ops);
    int *op_of = malloc((n + 1) * sizeof *op_of);
    PL_CHECK(ops && op_of, "out of host memory");
    size_t nops = plc_ops_from_trace(0, pl_comm_rank(comm), ops, n);
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = 0, w = 0; i < n; i++) op_of[i] = ev[i].kind == PL_OP_REGION ? -1 : (int)w++;
    /* rank 0 replays every rank's ops (the replay is the same computation everywhere) */
    char err[200];
    double pred[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        plc_op *list = pass ? without_prefetch(r, m, ops, nops, op_of, ev) : ops;
        size_t *counts = calloc((size_t)pl_comm_size(comm), sizeof *counts), total = 0;
        PL_CHECK(counts != NULL, "out of host memory");
        plc_op *all = pl_host_gatherv(list, nops * sizeof *list, counts, 0, comm);
        if (pass) free(list);
        if (pl_comm_rank(comm) == 0) {
            for (int q = 0; q < pl_comm_size(comm); q++) total += counts[q];
            plc_prediction pp;
            if (plc_replay(prof, all, total / sizeof *all, pl_comm_size(comm), &pp, err, sizeof err) == 0)
                pred[pass] = pp.step_time * 1e6;
            else
                pred[0] = pred[1] = 0, pass = 2;
        }
        free(all), free(counts);
        pl_host_bcast(&pass, sizeof pass, 0, comm);
    }
    pl_host_bcast(pred, sizeof pred, 0, comm);
    r->pred_us = pred[0], r->pred_noprefetch_us = pred[1];
    free(ops), free(op_of);
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
        pl_metrics_reset();
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
    zero_state z;
    const zero_model *m;
    pl_comm *comm;
    const plc_profile *prof;
    size_t n;                /* T * b */
};

l7_session *l7_session_start(const l7_in *in, const zero_model *m, pl_comm *comm, l7_out *out) {
    l7_session *s = calloc(1, sizeof *s);
    PL_CHECK(s != NULL, "out of host memory");
    s->m = m, s->comm = comm, s->n = (size_t)in->mc.seq * in->mc.batch;
    s->kit = l7_kit_new(&in->mc, m, in->cfg.param_dtype);
    float *init[ZERO_MAX_UNITS];
    for (int u = 0; u < m->nunits; u++) {
        init[u] = pl_malloc_floats(m->unit[u].numel);
        pl_upload(init[u], in->init[u], m->unit[u].numel * sizeof(float));
    }
    pl_device_sync();
    size_t before = pl_mem_tag_in_use(PL_MEM_UNTAGGED);
    zero_init(&s->z, m, &in->cfg, comm, init);
    pl_device_sync();
    for (int t = 0; t < PL_MEM_NTAGS; t++) out->mem_init[t] = pl_mem_tag_in_use((pl_mem_tag)t);
    size_t after = pl_mem_tag_in_use(PL_MEM_UNTAGGED);
    out->untagged_init = after > before ? after - before : 0;
    for (int u = 0; u < m->nunits; u++) pl_free(init[u]);
    out->nbuckets = s->z.nbuckets < 0 ? 0 : s->z.nbuckets > ZERO_MAX_BUCKETS ? ZERO_MAX_BUCKETS : s->z.nbuckets;
    memcpy(out->bucket, s->z.bucket, sizeof out->bucket);
    return s;
}

zero_state *l7_session_state(l7_session *s) { return &s->z; }

void l7_session_steps(l7_session *s, const l7_in *in, int from, int count, l7_out *out) {
    for (int i = 0; i < count && out->nsteps < L7_MAX_STEPS; i++) {
        l7_step *rec = &out->step[out->nsteps];
        const int *tk = in->tokens + (size_t)(from + i) * s->n, *tg = in->targets + (size_t)(from + i) * s->n;
        double loss = l7_kit_step(s->kit, &L7_STUDENT_HOOKS, &s->z, tk, tg, in->measure ? rec : NULL, out->why, sizeof out->why);
        if (!in->measure) rec->loss = loss;
        if (in->measure && s->prof && in->cfg.stage == 3 && i == count - 1) replay(rec, s->m, s->comm, s->prof);
        out->nsteps++;
    }
}

/* The pieces and their values, every unit's parameters as the hook gives them. */
static void final_state(l7_session *s, l7_out *out) {
    const zero_model *m = s->m;
    zero_state *z = &s->z;
    out->zstep = z->step;
    out->npieces = zero_pieces(z, out->piece, L7_MAX_PIECES);
    size_t total = 0;
    for (int j = 0; j < out->npieces; j++) {
        const zero_piece *p = &out->piece[j];
        if (p->tensor < 0 || p->tensor >= m->ntensors || p->count > m->tensor[p->tensor].numel ||
            p->begin > m->tensor[p->tensor].numel - p->count || !p->master || !p->m || !p->v) {
            if (!out->why[0]) snprintf(out->why, sizeof out->why, "zero_pieces: piece %d is not a slice of a tensor with three buffers", j);
            out->npieces = 0;
            break;
        }
        total += p->count;
    }
    out->master = malloc((total + 1) * 4), out->m = malloc((total + 1) * 4), out->v = malloc((total + 1) * 4);
    PL_CHECK(out->master && out->m && out->v, "out of host memory");
    for (int j = 0, at = 0; j < out->npieces; j++) {
        const zero_piece *p = &out->piece[j];
        pl_download(out->master + at, p->master, p->count * 4);
        pl_download(out->m + at, p->m, p->count * 4);
        pl_download(out->v + at, p->v, p->count * 4);
        at += (int)p->count;
    }
    size_t es = z->cfg.param_dtype == ZERO_BF16 ? 2 : 4;
    for (int u = 0; u < m->nunits; u++) {
        size_t n = m->unit[u].numel;
        out->full[u] = calloc(n + 1, sizeof(float));
        PL_CHECK(out->full[u] != NULL, "out of host memory");
        const void *p = zero_pre_forward(z, u);
        if (p) {
            uint16_t *h = es == 2 ? malloc(n * 2 + 2) : NULL;
            pl_download(es == 2 ? (void *)h : (void *)out->full[u], p, n * es);
            for (size_t i = 0; h && i < n; i++) out->full[u][i] = pl_bf16_to_float(h[i]);
            free(h);
        } else if (!out->why[0]) {
            snprintf(out->why, sizeof out->why, "zero_pre_forward(z, %d) returned NULL", u);
        }
        zero_post_forward(z, u);
    }
    pl_device_sync();
}

void l7_session_finish(l7_session *s, l7_out *out) {
    final_state(s, out);
    zero_free(&s->z);
    pl_device_sync();
    for (int t = 0; t < PL_MEM_NTAGS; t++) out->mem_end[t] = pl_mem_tag_in_use((pl_mem_tag)t);
    l7_kit_free(s->kit);
    free(s);
}

void l7_play(const l7_in *in, const zero_model *m, pl_comm *comm, const plc_profile *prof, l7_out *out) {
    memset(out, 0, sizeof *out);
    l7_session *s = l7_session_start(in, m, comm, out);
    s->prof = prof;
    l7_session_steps(s, in, 0, in->steps, out);
    l7_session_finish(s, out);
}

void l7_out_free(l7_out *o) {
    if (!o) return;
    free(o->master), free(o->m), free(o->v);
    for (int u = 0; u < ZERO_MAX_UNITS; u++) free(o->full[u]);
    o->master = o->m = o->v = NULL;
    memset(o->full, 0, sizeof o->full);
}

/* ==================================================================================== */
/* The pure functions                                                                    */
/* ==================================================================================== */

void l7_play_layouts(l7_layouts *q) {
    for (int i = 0; i < q->nb; i++) {
        const l7_bucket_q *b = &q->bq[i];
        q->ba[i].rc = zero_buckets(&q->models[b->model], b->cap, b->world, q->ba[i].b, b->max);
    }
    for (int i = 0; i < q->nc; i++) {
        const l7_chunk_q *c = &q->cq[i];
        l7_chunk_a *a = &q->ca[i];
        a->chunk = zero_chunk(c->dim0, c->world, c->rank, &a->first, &a->held);
    }
    for (int i = 0; i < q->np; i++) {
        const l7_plan_q *p = &q->pq[i];
        q->pa[i].rc = zero_ckpt_plan(p->mine, p->nmine, p->saved, p->nsaved, q->pa[i].reads, p->max);
    }
}
