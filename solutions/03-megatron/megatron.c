/* megatron.c - Lab 3 solution: a tensor-parallel GPT-2 block (pre-LN) with the
 * conjugate f/g operators, optional sequence parallelism, a stack and an SGD step.
 * Allowed: pl_gemm, pl_allreduce / pl_allgather / pl_reduce_scatter on c->tp, pl_copy,
 * pl_fill, pl_scale, pl_reduce_local, pl_malloc/pl_free, and the kernels/ dispatchers. */
#include <math.h>
#include <stdlib.h>

#include "kern_attention.h" // defines: kern_attention_forward, kern_attention_backward
#include "kern_bias.h"      // defines: kern_bias_forward, kern_bias_backward
#include "kern_gelu.h"      // defines: kern_gelu_forward, kern_gelu_backward
#include "kern_layernorm.h" // defines: kern_layernorm_forward, kern_layernorm_backward
#include "kern_residual.h"  // defines: kern_residual_forward
#include "megatron.h"

#define MG_EPS 1e-5f

struct mg_acts {
    float *x, *ln1, *mean1, *rstd1; /* [Nl, C], [Nl, C], [Nl], [Nl]   (sequence-sharded) */
    float *qkv, *probs, *att;       /* [N, 3C/tp], [B, H/tp, T, T], [N, C/tp]           */
    float *x1, *ln2, *mean2, *rstd2;/* [Nl, C] ...                     (sequence-sharded) */
    float *fc1, *gel;               /* [N, F/tp] before and after GELU                  */
    float *full, *red;              /* work: [N, C] gathered / partial, [Nl, C] reduced */
};

typedef struct {
    int tp, rank, T, B, C, H, F, Hl, hs, Cl, Fl;
    int N, Nl; /* rows of the block, rows this rank holds outside the TP regions */
} dims;

static dims dims_of(const mg_config *c) {
    dims d;
    d.tp = pl_comm_size(c->tp);
    d.rank = pl_comm_rank(c->tp);
    d.T = c->seq, d.B = c->batch, d.C = c->hidden, d.H = c->heads, d.F = c->ffn;
    d.Hl = d.H / d.tp, d.hs = d.C / d.H, d.Cl = d.C / d.tp, d.Fl = d.F / d.tp;
    d.N = d.T * d.B;
    d.Nl = c->sp ? d.N / d.tp : d.N;
    return d;
}

int mg_config_check(const mg_config *c) {
    int tp = pl_comm_size(c->tp);
    if (c->seq <= 0 || c->batch <= 0 || c->hidden <= 0 || c->heads <= 0 || c->ffn <= 0)
        return MG_ERR_SHAPE;
    if (c->heads % tp != 0) return MG_ERR_HEADS;
    if (c->sp && c->seq % tp != 0) return MG_ERR_SEQ;
    if (c->hidden % c->heads != 0 || c->ffn % tp != 0) return MG_ERR_SHAPE;
    return MG_OK;
}

void mg_params_init(mg_params *p, const mg_config *c, int layer, uint64_t seed) {
    dims d = dims_of(c);
    int r = d.rank;
    mg_fill_master(pl_tensor_view(p->ln1_w, 1, d.C), c, MG_LN1_W, layer, 0, 0, seed);
    mg_fill_master(pl_tensor_view(p->ln1_b, 1, d.C), c, MG_LN1_B, layer, 0, 0, seed);
    mg_fill_master(pl_tensor_view(p->ln2_w, 1, d.C), c, MG_LN2_W, layer, 0, 0, seed);
    mg_fill_master(pl_tensor_view(p->ln2_b, 1, d.C), c, MG_LN2_B, layer, 0, 0, seed);
    mg_fill_master(pl_tensor_view(p->proj_b, 1, d.C), c, MG_PROJ_B, layer, 0, 0, seed);
    mg_fill_master(pl_tensor_view(p->fc2_b, 1, d.C), c, MG_FC2_B, layer, 0, 0, seed);
    /* column shards: this rank's heads are master columns [r*3C/tp, (r+1)*3C/tp) */
    mg_fill_master(pl_tensor_view(p->qkv_w, d.C, 3 * d.Cl), c, MG_QKV_W, layer, 0, (int64_t)r * 3 * d.Cl, seed);
    mg_fill_master(pl_tensor_view(p->qkv_b, 1, 3 * d.Cl), c, MG_QKV_B, layer, 0, (int64_t)r * 3 * d.Cl, seed);
    mg_fill_master(pl_tensor_view(p->fc1_w, d.C, d.Fl), c, MG_FC1_W, layer, 0, (int64_t)r * d.Fl, seed);
    mg_fill_master(pl_tensor_view(p->fc1_b, 1, d.Fl), c, MG_FC1_B, layer, 0, (int64_t)r * d.Fl, seed);
    /* row shards: the input rows that match this rank's columns above */
    mg_fill_master(pl_tensor_view(p->proj_w, d.Cl, d.C), c, MG_PROJ_W, layer, (int64_t)r * d.Cl, 0, seed);
    mg_fill_master(pl_tensor_view(p->fc2_w, d.Fl, d.C), c, MG_FC2_W, layer, (int64_t)r * d.Fl, 0, seed);
}

mg_acts *mg_acts_alloc(const mg_config *c) {
    dims d = dims_of(c);
    /* the struct itself lives on the host; its buffers on the device */
    mg_acts *a = calloc(1, sizeof *a);
    if (!a) pl_fatal(__FILE__, __LINE__, "calloc", "out of host memory");
    size_t NlC = (size_t)d.Nl * d.C;
    a->x = pl_malloc_floats(NlC);
    a->ln1 = pl_malloc_floats(NlC);
    a->x1 = pl_malloc_floats(NlC);
    a->ln2 = pl_malloc_floats(NlC);
    a->mean1 = pl_malloc_floats(d.Nl);
    a->rstd1 = pl_malloc_floats(d.Nl);
    a->mean2 = pl_malloc_floats(d.Nl);
    a->rstd2 = pl_malloc_floats(d.Nl);
    a->qkv = pl_malloc_floats((size_t)d.N * 3 * d.Cl);
    a->probs = pl_malloc_floats((size_t)d.B * d.Hl * d.T * d.T);
    a->att = pl_malloc_floats((size_t)d.N * d.Cl);
    a->fc1 = pl_malloc_floats((size_t)d.N * d.Fl);
    a->gel = pl_malloc_floats((size_t)d.N * d.Fl);
    a->full = pl_malloc_floats((size_t)d.N * d.C);
    a->red = pl_malloc_floats(NlC);
    return a;
}

void mg_acts_free(mg_acts *a) {
    if (!a) return;
    float *all[] = {a->x, a->ln1, a->x1, a->ln2, a->mean1, a->rstd1, a->mean2, a->rstd2,
                    a->qkv, a->probs, a->att, a->fc1, a->gel, a->full, a->red};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pl_free(all[i]);
    free(a);
}

/* ---- the conjugate operators ------------------------------------------------------- */

/* Before a column layer, forward. f (no sp): identity, the input is already whole.
 * With sp: all-gather the sequence shards. Returns the [N, C] input of the layer. */
static const float *enter_column(const mg_config *c, const dims *d, const float *shard,
                                 float *full, pl_stream *s) {
    if (!c->sp || d->tp == 1) return shard;
    pl_allgather(shard, full, (size_t)d->Nl * d->C, c->tp, s);
    return full;
}

/* After a row layer, forward: partial [N, C] -> out [Nl, C]. g (no sp): all-reduce.
 * With sp: reduce-scatter. */
static void leave_row(const mg_config *c, const dims *d, float *partial, float *out,
                      pl_stream *s) {
    size_t NlC = (size_t)d->Nl * d->C;
    if (d->tp == 1) {
        pl_copy(out, partial, NlC * sizeof(float), s);
    } else if (c->sp) {
        pl_reduce_scatter(partial, out, NlC, PL_SUM, c->tp, s);
    } else {
        pl_allreduce(partial, out, NlC, PL_SUM, c->tp, s);
    }
}

void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y,
                      const float *x, pl_stream *s) {
    dims d = dims_of(c);
    size_t NlC = (size_t)d.Nl * d.C;
    pl_copy(a->x, x, NlC * sizeof(float), s);
    /* attention half */
    kern_layernorm_forward(a->ln1, a->mean1, a->rstd1, a->x, p->ln1_w, p->ln1_b, d.Nl, d.C, MG_EPS, s);
    const float *h = enter_column(c, &d, a->ln1, a->full, s);
    pl_gemm(false, false, d.N, 3 * d.Cl, d.C, 1.0f, h, d.C, p->qkv_w, 3 * d.Cl, 0.0f, a->qkv, 3 * d.Cl, s);
    kern_bias_forward(a->qkv, p->qkv_b, d.N, 3 * d.Cl, s);
    kern_attention_forward(a->att, a->probs, a->qkv, d.T, d.B, d.Hl, d.hs, 1.0f / sqrtf((float)d.hs), s);
    pl_gemm(false, false, d.N, d.C, d.Cl, 1.0f, a->att, d.Cl, p->proj_w, d.C, 0.0f, a->full, d.C, s);
    leave_row(c, &d, a->full, a->red, s);
    kern_bias_forward(a->red, p->proj_b, d.Nl, d.C, s); /* once, after the reduction */
    kern_residual_forward(a->x1, a->x, a->red, NlC, s);
    /* MLP half */
    kern_layernorm_forward(a->ln2, a->mean2, a->rstd2, a->x1, p->ln2_w, p->ln2_b, d.Nl, d.C, MG_EPS, s);
    h = enter_column(c, &d, a->ln2, a->full, s);
    pl_gemm(false, false, d.N, d.Fl, d.C, 1.0f, h, d.C, p->fc1_w, d.Fl, 0.0f, a->fc1, d.Fl, s);
    kern_bias_forward(a->fc1, p->fc1_b, d.N, d.Fl, s);
    kern_gelu_forward(a->gel, a->fc1, (size_t)d.N * d.Fl, s);
    pl_gemm(false, false, d.N, d.C, d.Fl, 1.0f, a->gel, d.Fl, p->fc2_w, d.C, 0.0f, a->full, d.C, s);
    leave_row(c, &d, a->full, a->red, s);
    kern_bias_forward(a->red, p->fc2_b, d.Nl, d.C, s);
    kern_residual_forward(y, a->x1, a->red, NlC, s);
}

/* Backward of a row layer's output operator: dy [Nl, C] -> [N, C]. g's conjugate
 * (no sp) is the identity; reduce-scatter's (sp) is an all-gather. */
static const float *enter_row_backward(const mg_config *c, const dims *d, const float *dshard,
                                       float *dfull, pl_stream *s) {
    return enter_column(c, d, dshard, dfull, s);
}

/* Backward of a column layer's input operator: partial dX [N, C] -> [Nl, C]. f's
 * conjugate (no sp) is an all-reduce; all-gather's (sp) is a reduce-scatter. */
static void leave_column_backward(const mg_config *c, const dims *d, float *partial,
                                  float *out, pl_stream *s) {
    leave_row(c, d, partial, out, s);
}

void mg_block_backward(const mg_config *c, const mg_params *p, mg_params *g, mg_acts *a,
                       float *dx, const float *dy, pl_stream *s) {
    dims d = dims_of(c);
    size_t NlC = (size_t)d.Nl * d.C, NC = (size_t)d.N * d.C;
    float *dfull = pl_malloc_floats(NC), *dpart = pl_malloc_floats(NC);
    float *hfull = pl_malloc_floats(NC), *dh = pl_malloc_floats(NlC), *dx1 = pl_malloc_floats(NlC);
    float *dgel = pl_malloc_floats((size_t)d.N * d.Fl), *datt = pl_malloc_floats((size_t)d.N * d.Cl);
    float *dqkv = pl_malloc_floats((size_t)d.N * 3 * d.Cl);
    float *scratch = pl_malloc_floats((size_t)d.B * d.Hl * d.T * d.T);

    /* MLP half: y = x1 + g(gelu(f(ln2(x1)) W1 + b1) W2) + b2 */
    kern_bias_backward(g->fc2_b, dy, d.Nl, d.C, s);
    const float *D = enter_row_backward(c, &d, dy, dfull, s);
    pl_gemm(true, false, d.Fl, d.C, d.N, 1.0f, a->gel, d.Fl, D, d.C, 1.0f, g->fc2_w, d.C, s);
    pl_gemm(false, true, d.N, d.Fl, d.C, 1.0f, D, d.C, p->fc2_w, d.C, 0.0f, dgel, d.Fl, s);
    kern_gelu_backward(dgel, dgel, a->fc1, (size_t)d.N * d.Fl, s);
    kern_bias_backward(g->fc1_b, dgel, d.N, d.Fl, s);
    const float *h = enter_column(c, &d, a->ln2, hfull, s); /* sp: re-gather, not stashed */
    pl_gemm(true, false, d.C, d.Fl, d.N, 1.0f, h, d.C, dgel, d.Fl, 1.0f, g->fc1_w, d.Fl, s);
    pl_gemm(false, true, d.N, d.C, d.Fl, 1.0f, dgel, d.Fl, p->fc1_w, d.Fl, 0.0f, dpart, d.C, s);
    leave_column_backward(c, &d, dpart, dh, s);
    kern_layernorm_backward(dx1, g->ln2_w, g->ln2_b, dh, a->x1, p->ln2_w, a->mean2, a->rstd2, d.Nl, d.C, s);
    kern_residual_forward(dx1, dx1, dy, NlC, s); /* the residual branch */

    /* attention half: x1 = x + g(attn(f(ln1(x)) Wqkv + bqkv) Wproj) + bproj */
    kern_bias_backward(g->proj_b, dx1, d.Nl, d.C, s);
    D = enter_row_backward(c, &d, dx1, dfull, s);
    pl_gemm(true, false, d.Cl, d.C, d.N, 1.0f, a->att, d.Cl, D, d.C, 1.0f, g->proj_w, d.C, s);
    pl_gemm(false, true, d.N, d.Cl, d.C, 1.0f, D, d.C, p->proj_w, d.C, 0.0f, datt, d.Cl, s);
    kern_attention_backward(dqkv, scratch, datt, a->qkv, a->probs, d.T, d.B, d.Hl, d.hs,
                            1.0f / sqrtf((float)d.hs), s);
    kern_bias_backward(g->qkv_b, dqkv, d.N, 3 * d.Cl, s);
    h = enter_column(c, &d, a->ln1, hfull, s);
    pl_gemm(true, false, d.C, 3 * d.Cl, d.N, 1.0f, h, d.C, dqkv, 3 * d.Cl, 1.0f, g->qkv_w, 3 * d.Cl, s);
    pl_gemm(false, true, d.N, d.C, 3 * d.Cl, 1.0f, dqkv, 3 * d.Cl, p->qkv_w, 3 * d.Cl, 0.0f, dpart, d.C, s);
    leave_column_backward(c, &d, dpart, dh, s);
    kern_layernorm_backward(dx, g->ln1_w, g->ln1_b, dh, a->x, p->ln1_w, a->mean1, a->rstd1, d.Nl, d.C, s);
    kern_residual_forward(dx, dx, dx1, NlC, s);

    float *tmp[] = {dfull, dpart, hfull, dh, dx1, dgel, datt, dqkv, scratch};
    pl_stream_sync(s ? s : pl_stream_compute());
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) pl_free(tmp[i]);
}

void mg_sync_sp_grads(const mg_config *c, mg_params *g, pl_stream *s) {
    if (!c->sp || pl_comm_size(c->tp) == 1) return;
    pl_allreduce(g->base, g->base, g->replicated, PL_SUM, c->tp, s);
}

void mg_stack_forward(const mg_config *c, int L, const mg_params *p, mg_acts **a, float *y,
                      const float *x, pl_stream *s) {
    dims d = dims_of(c);
    size_t NlC = (size_t)d.Nl * d.C;
    float *cur = pl_malloc_floats(NlC), *next = pl_malloc_floats(NlC);
    pl_copy(cur, x, NlC * sizeof(float), s);
    for (int l = 0; l < L; l++) {
        mg_block_forward(c, &p[l], a[l], next, cur, s);
        float *t = cur;
        cur = next;
        next = t;
    }
    pl_copy(y, cur, NlC * sizeof(float), s);
    pl_stream_sync(s ? s : pl_stream_compute());
    pl_free(cur);
    pl_free(next);
}

void mg_stack_backward(const mg_config *c, int L, const mg_params *p, mg_params *g,
                       mg_acts **a, float *dx, const float *dy, pl_stream *s) {
    dims d = dims_of(c);
    size_t NlC = (size_t)d.Nl * d.C;
    float *cur = pl_malloc_floats(NlC), *next = pl_malloc_floats(NlC);
    pl_copy(cur, dy, NlC * sizeof(float), s);
    for (int l = L - 1; l >= 0; l--) {
        mg_block_backward(c, &p[l], &g[l], a[l], next, cur, s);
        float *t = cur;
        cur = next;
        next = t;
    }
    pl_copy(dx, cur, NlC * sizeof(float), s);
    pl_stream_sync(s ? s : pl_stream_compute());
    pl_free(cur);
    pl_free(next);
}

void mg_sgd_step(const mg_config *c, int L, mg_params *p, mg_params *g, float lr, pl_stream *s) {
    for (int l = 0; l < L; l++) {
        mg_sync_sp_grads(c, &g[l], s);
        /* p -= lr g, with the harness's elementwise ops (g is scaled in place) */
        pl_scale(g[l].base, -lr, g[l].count, s);
        pl_reduce_local(p[l].base, g[l].base, g[l].count, PL_SUM, s);
    }
}
