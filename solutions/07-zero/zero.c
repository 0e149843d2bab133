/* zero.c - Lab 7 reference solution: ZeRO-1 and ZeRO-2 over flat buckets (Megatron's
 * distributed optimizer), ZeRO-3 with FSDP2's dim-0 chunks, prefetch and resharding, bf16
 * mixed precision, and the slice plan of a resharded checkpoint (labs/07-zero/README.md).
 *
 * Nothing in a step synchronises the host: buffers that a later unit reuses (two gather
 * slots, two reduce slots) are handed between the streams with events, so an all-gather or
 * a reduce-scatter on the comm stream really runs beside the compute of another unit. */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

/* ==================================================================================== */
/* Layouts                                                                               */
/* ==================================================================================== */

int zero_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max) {
    if (!m || world < 1 || cap == 0 || m->nunits < 1) return ZERO_ERR_ARG;
    int n = 0;
    size_t offset = 0;
    for (int u = m->nunits - 1; u >= 0; u--) {
        if (n == 0 || out[n - 1].numel >= cap) { /* the current bucket reached the cap */
            if (n == max) return ZERO_ERR_CAPACITY;
            if (n > 0) offset += out[n - 1].padded;
            out[n++] = (zero_bucket){.first_unit = u, .offset = offset};
        }
        zero_bucket *b = &out[n - 1];
        b->nunits++;
        b->numel += m->unit[u].numel;
        b->padded = (b->numel + (size_t)world - 1) / (size_t)world * (size_t)world;
        b->shard = b->padded / (size_t)world;
    }
    return n;
}

size_t zero_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held) {
    *first = *held = 0;
    if (dim0 == 0 || world < 1) return 0;
    size_t chunk = (dim0 + (size_t)world - 1) / (size_t)world, r = (size_t)rank;
    *first = r * chunk < dim0 ? r * chunk : dim0;
    *held = dim0 - *first < chunk ? dim0 - *first : chunk;
    return chunk;
}

/* ==================================================================================== */
/* State                                                                                 */
/* ==================================================================================== */

enum { SHARDED = 0, GATHERING, GATHERED };

typedef struct {
    size_t S;                    /* shard elements, padding included                   */
    size_t toff[ZERO_MAX_TENSORS]; /* by tensor index: its chunk's offset in the shard */
    void *param, *grad;          /* [S] param dtype: PARAMS, GRADS                      */
    float *master, *m, *v;       /* [S]: OPTIM (master only in bf16 runs)               */
    int state;
    void *full;                  /* no reshard: its own full buffer                    */
} unit3;

typedef struct {
    size_t es, rs;               /* bytes of a parameter and of a reduced element       */
    /* stages 1 and 2 */
    size_t flat, shards;         /* elements of all buckets, and of this rank's shards  */
    size_t uoff[ZERO_MAX_UNITS]; /* each unit's start in the flat space                 */
    int bucket_of[ZERO_MAX_UNITS];
    size_t shard_off[ZERO_MAX_BUCKETS]; /* bucket b's shard in the shard buffers        */
    void *params, *grads;        /* [flat]: PARAMS; stage 1 GRADS                       */
    void *grad_shard;            /* stage 2: [shards] GRADS                              */
    float *master, *m, *v;       /* [shards] OPTIM                                       */
    /* stage 3 */
    unit3 u3[ZERO_MAX_UNITS];
    size_t max_ws, max_numel, max_S; /* world * S_u, numel_u, S_u at most               */
    /* two slots each, unit (or bucket) k in slot k % 2 */
    void *gathered[2], *full[2]; /* GATHER                                              */
    void *grad_full;             /* REDUCE: where the kit writes a unit's gradient       */
    void *send[2];               /* REDUCE: [world][S] (stage 3) or a bucket (stage 2)   */
    float *wide[2];              /* REDUCE: fp32 reduce of bf16 gradients                */
    pl_event *gather_done[2], *rs_done[2], *c2m, *m2c;
    bool rs_pending[2];
    float *norm;                 /* [2]: the sum of squares, then the clip coefficient   */
} ext;

static ext *X(const zero_state *z) { return (ext *)z->extra; }

/* The comm stream waits for what the compute stream has issued so far, or the other way. */
static void comm_after_compute(ext *x) {
    pl_event_record(x->c2m, NULL);
    pl_stream_wait_event(pl_stream_comm(), x->c2m);
}
static void compute_after_comm(ext *x) {
    pl_event_record(x->m2c, pl_stream_comm());
    pl_stream_wait_event(NULL, x->m2c);
}

/* fp32 values src[0..n) into dst in the parameters' dtype, on stream s. */
static void store(void *dst, const float *src, size_t n, zero_dtype d, pl_stream *s) {
    if (d == ZERO_BF16) kern_bf16_from_f32(dst, src, n, s);
    else pl_copy(dst, src, n * sizeof(float), s);
}

static void *at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

static void *zalloc(size_t bytes, pl_mem_tag tag) {
    void *p = pl_malloc_tagged(bytes, tag);
    pl_memset(p, 0, bytes, NULL);
    return p;
}

/* ---- stages 1 and 2 ------------------------------------------------------------------- */

static void init_flat(zero_state *z, ext *x, float *const *init) {
    const zero_model *m = z->model;
    z->nbuckets = zero_buckets(m, z->cfg.bucket_cap, z->world, z->bucket, ZERO_MAX_BUCKETS);
    PL_CHECK(z->nbuckets > 0, "zero_init: the buckets do not fit ZERO_MAX_BUCKETS");
    for (int b = 0; b < z->nbuckets; b++) {
        const zero_bucket *bk = &z->bucket[b];
        size_t at_ = bk->offset;
        for (int k = 0; k < bk->nunits; k++) {
            int u = bk->first_unit - k;
            x->uoff[u] = at_, x->bucket_of[u] = b;
            at_ += m->unit[u].numel;
        }
        x->shard_off[b] = x->shards;
        x->shards += bk->shard;
        x->flat = bk->offset + bk->padded;
    }
    zero_dtype pd = z->cfg.param_dtype;
    x->params = zalloc(x->flat * x->es, PL_MEM_PARAMS);
    for (int u = 0; u < m->nunits; u++) store(at(x->params, x->uoff[u], x->es), init[u], m->unit[u].numel, pd, NULL);
    if (z->cfg.stage == 1) x->grads = zalloc(x->flat * x->es, PL_MEM_GRADS);
    else x->grad_shard = zalloc(x->shards * x->es, PL_MEM_GRADS);
    x->m = zalloc(x->shards * 4, PL_MEM_OPTIM);
    x->v = zalloc(x->shards * 4, PL_MEM_OPTIM);
    size_t max_padded = 0;
    for (int b = 0; b < z->nbuckets; b++) max_padded = z->bucket[b].padded > max_padded ? z->bucket[b].padded : max_padded;
    if (pd == ZERO_BF16) {
        /* the master weights: this rank's slice of every bucket, from the fp32 initial values */
        x->master = zalloc(x->shards * 4, PL_MEM_OPTIM);
        for (int u = 0; u < m->nunits; u++) {
            const zero_bucket *bk = &z->bucket[x->bucket_of[u]];
            size_t lo = bk->offset + (size_t)z->rank * bk->shard, hi = lo + bk->shard;
            size_t a = x->uoff[u] > lo ? x->uoff[u] : lo, e = x->uoff[u] + m->unit[u].numel;
            if (e > hi) e = hi;
            if (a < e)
                pl_copy(x->master + x->shard_off[x->bucket_of[u]] + (a - lo), init[u] + (a - x->uoff[u]), (e - a) * 4, NULL);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (z->cfg.stage == 2) x->send[k] = zalloc(max_padded * x->es, PL_MEM_REDUCE);
        if (pd == ZERO_BF16 && z->cfg.reduce_dtype == ZERO_FP32 && (z->cfg.stage == 2 || k == 0))
            x->wide[k] = zalloc(max_padded * 4, PL_MEM_REDUCE);
    }
}

/* Reduce-scatter bucket b's gradients (in buf, padded) into this rank's shard `out`. */
static void reduce_bucket(zero_state *z, ext *x, int b, void *buf, void *out, int slot, pl_stream *s) {
    const zero_bucket *bk = &z->bucket[b];
    if (z->cfg.param_dtype == ZERO_FP32) {
        pl_reduce_scatter(buf, out, bk->shard, PL_AVG, z->comm, s);
    } else if (z->cfg.reduce_dtype == ZERO_BF16) {
        pl_reduce_scatter_bf16(buf, out, bk->shard, PL_AVG, z->comm, s);
    } else {
        /* FSDP2's reduce_dtype fp32: widen, reduce, round the shard back to bf16 */
        float *w = x->wide[slot];
        kern_bf16_to_f32(w, buf, bk->padded, NULL);
        if (s) comm_after_compute(x);
        pl_reduce_scatter(w, w + (size_t)z->rank * bk->shard, bk->shard, PL_AVG, z->comm, s);
        kern_bf16_from_f32(out, w + (size_t)z->rank * bk->shard, bk->shard, s);
    }
}

/* ---- stage 3 --------------------------------------------------------------------------- */

static void init_units(zero_state *z, ext *x, float *const *init) {
    const zero_model *m = z->model;
    zero_dtype pd = z->cfg.param_dtype;
    for (int u = 0; u < m->nunits; u++) {
        unit3 *q = &x->u3[u];
        for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count; t++) {
            size_t first, held, chunk = zero_chunk(m->tensor[t].dim0, z->world, z->rank, &first, &held);
            q->toff[t] = q->S;
            q->S += chunk * m->tensor[t].row;
        }
        q->param = zalloc(q->S * x->es, PL_MEM_PARAMS);
        q->grad = zalloc(q->S * x->es, PL_MEM_GRADS);
        q->m = zalloc(q->S * 4, PL_MEM_OPTIM);
        q->v = zalloc(q->S * 4, PL_MEM_OPTIM);
        if (pd == ZERO_BF16) q->master = zalloc(q->S * 4, PL_MEM_OPTIM);
        for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count; t++) {
            const zero_tensor *tt = &m->tensor[t];
            size_t first, held;
            zero_chunk(tt->dim0, z->world, z->rank, &first, &held);
            const float *src = init[u] + tt->offset + first * tt->row;
            store(at(q->param, q->toff[t], x->es), src, held * tt->row, pd, NULL);
            if (pd == ZERO_BF16) pl_copy(q->master + q->toff[t], src, held * tt->row * 4, NULL);
        }
        size_t ws = (size_t)z->world * q->S;
        x->max_ws = ws > x->max_ws ? ws : x->max_ws;
        x->max_S = q->S > x->max_S ? q->S : x->max_S;
        x->max_numel = m->unit[u].numel > x->max_numel ? m->unit[u].numel : x->max_numel;
        if (!z->cfg.reshard_after_forward) q->full = pl_malloc_tagged(m->unit[u].numel * x->es, PL_MEM_GATHER);
    }
    size_t rs = x->rs;
    for (int k = 0; k < 2; k++) {
        x->gathered[k] = pl_malloc_tagged(x->max_ws * x->es, PL_MEM_GATHER);
        if (z->cfg.reshard_after_forward) x->full[k] = pl_malloc_tagged(x->max_numel * x->es, PL_MEM_GATHER);
        x->send[k] = pl_malloc_tagged(x->max_ws * rs, PL_MEM_REDUCE);
        if (x->es != rs) x->wide[k] = pl_malloc_tagged(x->max_S * 4, PL_MEM_REDUCE);
    }
    x->grad_full = pl_malloc_tagged(x->max_numel * x->es, PL_MEM_REDUCE);
}

/* Start unit u's all-gather on the comm stream into its slot, unless it is gathered. */
static void gather(zero_state *z, ext *x, int u) {
    unit3 *q = &x->u3[u];
    if (q->state != SHARDED) return;
    int k = u % 2;
    /* the slot's last copy-out and the optimizer's update of the shard come first */
    comm_after_compute(x);
    if (z->cfg.param_dtype == ZERO_BF16) pl_allgather_bf16(q->param, x->gathered[k], q->S, z->comm, pl_stream_comm());
    else pl_allgather(q->param, x->gathered[k], q->S, z->comm, pl_stream_comm());
    pl_event_record(x->gather_done[k], pl_stream_comm());
    q->state = GATHERING;
}

static void *full_of(ext *x, const zero_state *z, int u) {
    return z->cfg.reshard_after_forward ? x->full[u % 2] : x->u3[u].full;
}

/* Unit u's full buffer, ready on the compute stream: gather if needed, wait, copy out. */
static void *materialize(zero_state *z, ext *x, int u) {
    const zero_model *m = z->model;
    unit3 *q = &x->u3[u];
    gather(z, x, u);
    void *full = full_of(x, z, u);
    if (q->state == GATHERING) {
        int k = u % 2;
        pl_stream_wait_event(NULL, x->gather_done[k]);
        for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count; t++) {
            const zero_tensor *tt = &m->tensor[t];
            for (int r = 0; r < z->world; r++) {
                size_t first, held;
                zero_chunk(tt->dim0, z->world, r, &first, &held);
                pl_copy(at(full, tt->offset + first * tt->row, x->es),
                        at(x->gathered[k], (size_t)r * q->S + q->toff[t], x->es), held * tt->row * x->es, NULL);
            }
        }
        q->state = GATHERED;
    }
    return full;
}

/* Unit u's gradient (in grad_full) into send slot k, padded, [world][S], then its
 * reduce-scatter on the comm stream into the unit's gradient shard. */
static void reduce_unit(zero_state *z, ext *x, int u) {
    const zero_model *m = z->model;
    unit3 *q = &x->u3[u];
    int k = u % 2;
    if (x->rs_pending[k]) pl_stream_wait_event(NULL, x->rs_done[k]); /* the slot's last reduce read it */
    void *send = x->send[k];
    pl_memset(send, 0, (size_t)z->world * q->S * x->rs, NULL);
    bool widen = x->es != x->rs;
    for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count; t++) {
        const zero_tensor *tt = &m->tensor[t];
        for (int r = 0; r < z->world; r++) {
            size_t first, held;
            zero_chunk(tt->dim0, z->world, r, &first, &held);
            void *dst = at(send, (size_t)r * q->S + q->toff[t], x->rs);
            const void *src = at(x->grad_full, tt->offset + first * tt->row, x->es);
            if (widen) kern_bf16_to_f32(dst, src, held * tt->row, NULL);
            else pl_copy(dst, src, held * tt->row * x->es, NULL);
        }
    }
    comm_after_compute(x);
    pl_stream *cs = pl_stream_comm();
    if (z->cfg.param_dtype == ZERO_FP32) {
        pl_reduce_scatter(send, q->grad, q->S, PL_AVG, z->comm, cs);
    } else if (!widen) {
        pl_reduce_scatter_bf16(send, q->grad, q->S, PL_AVG, z->comm, cs);
    } else {
        pl_reduce_scatter(send, x->wide[k], q->S, PL_AVG, z->comm, cs);
        kern_bf16_from_f32(q->grad, x->wide[k], q->S, cs);
    }
    pl_event_record(x->rs_done[k], cs);
    x->rs_pending[k] = true;
}

/* ==================================================================================== */
/* The hooks                                                                             */
/* ==================================================================================== */

void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    memset(z, 0, sizeof *z);
    z->cfg = *cfg;
    z->model = m;
    z->comm = comm;
    z->rank = pl_comm_rank(comm);
    z->world = pl_comm_size(comm);
    ext *x = calloc(1, sizeof *x);
    PL_CHECK(x != NULL, "out of host memory");
    z->extra = x;
    x->es = cfg->param_dtype == ZERO_BF16 ? 2 : 4;
    x->rs = cfg->param_dtype == ZERO_BF16 && cfg->reduce_dtype == ZERO_BF16 ? 2 : 4;
    x->c2m = pl_event_create(), x->m2c = pl_event_create();
    for (int k = 0; k < 2; k++) x->gather_done[k] = pl_event_create(), x->rs_done[k] = pl_event_create();
    x->norm = pl_malloc_floats(2);
    if (cfg->stage == 3) init_units(z, x, init);
    else init_flat(z, x, init);
    pl_device_sync(); /* init[] is the kit's until this returns */
}

const void *zero_pre_forward(zero_state *z, int u) {
    ext *x = X(z);
    if (z->cfg.stage != 3) return at(x->params, x->uoff[u], x->es);
    void *full = materialize(z, x, u);
    if (u + 1 < z->model->nunits) gather(z, x, u + 1); /* prefetch */
    return full;
}

void zero_post_forward(zero_state *z, int u) {
    if (z->cfg.stage == 3 && z->cfg.reshard_after_forward) X(z)->u3[u].state = SHARDED; /* its slot is free */
}

const void *zero_pre_backward(zero_state *z, int u, void **grad) {
    ext *x = X(z);
    if (z->cfg.stage == 1) {
        *grad = at(x->grads, x->uoff[u], x->es);
        return at(x->params, x->uoff[u], x->es);
    }
    if (z->cfg.stage == 2) {
        int b = x->bucket_of[u], k = b % 2;
        const zero_bucket *bk = &z->bucket[b];
        if (u == bk->first_unit) { /* the bucket's first gradient: its slot must be free */
            if (x->rs_pending[k]) pl_stream_wait_event(NULL, x->rs_done[k]);
            pl_memset(at(x->send[k], bk->numel, x->es), 0, (bk->padded - bk->numel) * x->es, NULL);
        }
        *grad = at(x->send[k], x->uoff[u] - bk->offset, x->es);
        return at(x->params, x->uoff[u], x->es);
    }
    void *full = materialize(z, x, u);
    if (u > 0) gather(z, x, u - 1); /* prefetch, backward order */
    *grad = x->grad_full;
    return full;
}

void zero_post_backward(zero_state *z, int u) {
    ext *x = X(z);
    if (z->cfg.stage == 1) return;
    if (z->cfg.stage == 2) {
        int b = x->bucket_of[u], k = b % 2;
        const zero_bucket *bk = &z->bucket[b];
        if (u != bk->first_unit - bk->nunits + 1) return; /* the bucket is not complete yet */
        if (z->cfg.param_dtype == ZERO_BF16 && z->cfg.reduce_dtype == ZERO_FP32) {
            reduce_bucket(z, x, b, x->send[k], at(x->grad_shard, x->shard_off[b], x->es), k, pl_stream_comm());
        } else {
            comm_after_compute(x);
            reduce_bucket(z, x, b, x->send[k], at(x->grad_shard, x->shard_off[b], x->es), k, pl_stream_comm());
        }
        pl_event_record(x->rs_done[k], pl_stream_comm());
        x->rs_pending[k] = true;
        return;
    }
    x->u3[u].state = SHARDED; /* done with its parameters until the next forward */
    reduce_unit(z, x, u);
}

void zero_step(zero_state *z) {
    ext *x = X(z);
    const zero_config *c = &z->cfg;
    bool bf16 = c->param_dtype == ZERO_BF16;
    compute_after_comm(x); /* every reduce-scatter issued during backward has landed */
    if (c->stage == 1)
        for (int b = 0; b < z->nbuckets; b++) {
            const zero_bucket *bk = &z->bucket[b];
            void *buf = at(x->grads, bk->offset, x->es);
            reduce_bucket(z, x, b, buf, at(buf, (size_t)z->rank * bk->shard, x->es), 0, NULL);
        }
    /* the global norm: this rank's shards, summed over the ranks */
    pl_fill(x->norm, 0.0f, 1, NULL);
    int n = c->stage == 3 ? z->model->nunits : z->nbuckets;
    for (int i = 0; i < n; i++) {
        const void *g;
        size_t cnt;
        if (c->stage == 3) g = x->u3[i].grad, cnt = x->u3[i].S;
        else if (c->stage == 2) g = at(x->grad_shard, x->shard_off[i], x->es), cnt = z->bucket[i].shard;
        else g = at(x->grads, z->bucket[i].offset + (size_t)z->rank * z->bucket[i].shard, x->es), cnt = z->bucket[i].shard;
        if (bf16) kern_clip_sumsq_bf16(x->norm, g, cnt, NULL);
        else kern_clip_sumsq(x->norm, g, cnt, NULL);
    }
    pl_allreduce(x->norm, x->norm, 1, PL_SUM, z->comm, NULL);
    kern_clip_coef(x->norm + 1, x->norm, c->max_norm, NULL);
    int t = z->step + 1;
    for (int i = 0; i < n; i++) {
        void *param, *grad;
        float *master, *m, *v;
        size_t cnt;
        if (c->stage == 3) {
            unit3 *q = &x->u3[i];
            param = q->param, grad = q->grad, master = q->master, m = q->m, v = q->v, cnt = q->S;
        } else {
            const zero_bucket *bk = &z->bucket[i];
            size_t own = bk->offset + (size_t)z->rank * bk->shard, so = x->shard_off[i];
            param = at(x->params, own, x->es);
            grad = c->stage == 1 ? at(x->grads, own, x->es) : at(x->grad_shard, so, x->es);
            master = x->master ? x->master + so : NULL, m = x->m + so, v = x->v + so, cnt = bk->shard;
        }
        if (bf16)
            kern_clip_adamw_bf16(master, m, v, grad, x->norm + 1, param, cnt, c->lr, c->beta1, c->beta2, c->eps,
                                 c->weight_decay, t, NULL);
        else
            kern_clip_adamw(param, m, v, grad, x->norm + 1, cnt, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, t,
                            NULL);
    }
    z->step = t;
    if (c->stage == 3) return;
    for (int b = 0; b < z->nbuckets; b++) { /* every rank's full parameters again, in place */
        const zero_bucket *bk = &z->bucket[b];
        void *buf = at(x->params, bk->offset, x->es);
        if (bf16) pl_allgather_bf16(at(buf, (size_t)z->rank * bk->shard, 2), buf, bk->shard, z->comm, NULL);
        else pl_allgather(at(buf, (size_t)z->rank * bk->shard, 4), buf, bk->shard, z->comm, NULL);
    }
}

void zero_free(zero_state *z) {
    ext *x = X(z);
    if (!x) return;
    pl_device_sync();
    void *bufs[] = {x->params, x->grads, x->grad_shard, x->master, x->m, x->v, x->gathered[0], x->gathered[1],
                    x->full[0], x->full[1], x->grad_full, x->send[0], x->send[1], x->wide[0], x->wide[1], x->norm};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_free(bufs[i]);
    for (int u = 0; z->cfg.stage == 3 && u < z->model->nunits; u++) {
        unit3 *q = &x->u3[u];
        void *ub[] = {q->param, q->grad, q->master, q->m, q->v, q->full};
        for (size_t i = 0; i < sizeof ub / sizeof ub[0]; i++) pl_free(ub[i]);
    }
    pl_event *evs[] = {x->c2m, x->m2c, x->gather_done[0], x->gather_done[1], x->rs_done[0], x->rs_done[1]};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) pl_event_destroy(evs[i]);
    free(x);
    z->extra = NULL;
}

/* ==================================================================================== */
/* Checkpoints                                                                           */
/* ==================================================================================== */

static int add_piece(zero_piece *out, int n, int max, zero_piece p) {
    if (p.count == 0) return n;
    if (n >= max) return ZERO_ERR_CAPACITY;
    out[n] = p;
    return n + 1;
}

int zero_pieces(const zero_state *z, zero_piece *out, int max) {
    const ext *x = X(z);
    const zero_model *m = z->model;
    bool bf16 = z->cfg.param_dtype == ZERO_BF16;
    int n = 0;
    for (int u = 0; u < m->nunits && n >= 0; u++)
        for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count && n >= 0; t++) {
            const zero_tensor *tt = &m->tensor[t];
            if (z->cfg.stage == 3) {
                const unit3 *q = &x->u3[u];
                size_t first, held, o = q->toff[t];
                zero_chunk(tt->dim0, z->world, z->rank, &first, &held);
                float *master = bf16 ? q->master + o : (float *)q->param + o;
                n = add_piece(out, n, max, (zero_piece){t, first * tt->row, held * tt->row, master, q->m + o, q->v + o});
                continue;
            }
            /* the tensor's flat range, cut by this rank's shard of its bucket */
            const zero_bucket *bk = &z->bucket[x->bucket_of[u]];
            size_t lo = bk->offset + (size_t)z->rank * bk->shard, hi = lo + bk->shard;
            size_t a = x->uoff[u] + tt->offset, e = a + tt->numel;
            size_t s = a > lo ? a : lo, f = e < hi ? e : hi;
            if (s >= f) continue;
            size_t o = x->shard_off[x->bucket_of[u]] + (s - lo);
            float *master = bf16 ? x->master + o : (float *)x->params + s;
            n = add_piece(out, n, max, (zero_piece){t, s - a, f - s, master, x->m + o, x->v + o});
        }
    return n;
}

int zero_ckpt_plan(const zero_piece *mine, int nmine, const zero_saved_piece *saved, int nsaved, zero_read *out,
                   int max) {
    int n = 0;
    for (int i = 0; i < nmine; i++) {
        size_t pos = mine[i].begin, end = mine[i].begin + mine[i].count;
        while (pos < end) {
            /* the saved piece of the same tensor that holds element pos */
            int j = 0;
            while (j < nsaved && !(saved[j].tensor == mine[i].tensor && saved[j].begin <= pos &&
                                   pos < saved[j].begin + saved[j].count))
                j++;
            if (j == nsaved) return ZERO_ERR_COVERAGE;
            size_t stop = saved[j].begin + saved[j].count < end ? saved[j].begin + saved[j].count : end;
            if (n == max) return ZERO_ERR_CAPACITY;
            out[n++] = (zero_read){i, pos - mine[i].begin, j, pos - saved[j].begin, stop - pos};
            pos = stop;
        }
    }
    return n;
}

void zero_ckpt_loaded(zero_state *z) {
    ext *x = X(z);
    bool bf16 = z->cfg.param_dtype == ZERO_BF16;
    if (z->cfg.stage == 3) {
        for (int u = 0; bf16 && u < z->model->nunits; u++)
            kern_bf16_from_f32(x->u3[u].param, x->u3[u].master, x->u3[u].S, NULL);
        return;
    }
    for (int b = 0; b < z->nbuckets; b++) {
        const zero_bucket *bk = &z->bucket[b];
        void *buf = at(x->params, bk->offset, x->es), *own = at(buf, (size_t)z->rank * bk->shard, x->es);
        if (bf16) {
            kern_bf16_from_f32(own, x->master + x->shard_off[b], bk->shard, NULL);
            pl_allgather_bf16(own, buf, bk->shard, z->comm, NULL);
        } else {
            pl_allgather(own, buf, bk->shard, z->comm, NULL);
        }
    }
}
