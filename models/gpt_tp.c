/* gpt_tp.c - the GPT-2 block split over a tensor-parallel group (gpt_tp.h): shard layout,
 * host initialisation and slicing, activation records, forward and backward with the
 * group's two all-reduces each way. Plain C over the kernels/ dispatchers, pl_gemm and the
 * library all-reduce, so it runs on the cpu and the cuda device. */
#include "gpt_tp.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_attention.h" // defines: kern_attention_forward, kern_attention_backward
#include "kern_bias.h"      // defines: kern_bias_forward, kern_bias_backward
#include "kern_gelu.h"      // defines: kern_gelu_forward, kern_gelu_backward
#include "kern_layernorm.h" // defines: kern_layernorm_forward, kern_layernorm_backward
#include "kern_residual.h"  // defines: kern_residual_forward
#include "pl_rng.h"         // defines: pl_rng_fill_host
#include "pl_runtime.h"     // defines: pl_fatal, PL_CHECK
#include "pl_trace.h"       // defines: pl_region_begin, pl_region_end

#define fail(who, ...) pl_fatalf(__FILE__, __LINE__, (who), __VA_ARGS__)

bool gpt_tp_config_valid(const gpt_config *c, int t, char *why, size_t why_len) {
    if (!gpt_config_valid(c, why, why_len)) return false;
    if (t < 1 || c->heads % t || c->ffn % t) {
        if (why && why_len) snprintf(why, why_len, "t = %d must divide the heads (%d) and the MLP width (%d)", t, c->heads, c->ffn);
        return false;
    }
    return true;
}

static void require(const gpt_config *c, int t, const char *who) {
    char why[200];
    if (!gpt_tp_config_valid(c, t, why, sizeof why)) fail(who, "%s", why);
}

/* ==================================================================================== */
/* Shards                                                                                 */
/* ==================================================================================== */

gpt_tp_shard gpt_tp_block_shard(const gpt_config *c, int which, int t, int r) {
    require(c, t, "gpt_tp_block_shard");
    if (which < 0 || which >= GPT_BLOCK_NTENSORS || r < 0 || r >= t)
        fail("gpt_tp_block_shard", "tensor %d of rank %d of %d", which, r, t);
    gpt_tp_shard sh = {0};
    for (int i = 0; i <= which; i++) {
        gpt_tensor_info ti = gpt_tensor(c, GPT_PART_BLOCK, i, 0);
        gpt_tp_shard x = {ti.rows, ti.cols, 0, 0, 0, true};
        switch (i) {
        case GPT_QKV_W: case GPT_FC1_W: /* column-parallel: a block of output rows */
            x.rows = ti.rows / t, x.row0 = r * x.rows, x.replicated = false;
            break;
        case GPT_QKV_B: case GPT_FC1_B: case GPT_PROJ_W: case GPT_FC2_W: /* the same outputs; row-parallel inputs */
            x.cols = ti.cols / t, x.col0 = r * x.cols, x.replicated = false;
            break;
        default: break; /* layer norms and the row-parallel layers' biases */
        }
        if (i < which) {
            sh.offset += (size_t)(x.rows * x.cols);
            continue;
        }
        x.offset = sh.offset;
        sh = x;
    }
    return sh;
}

size_t gpt_tp_block_count(const gpt_config *c, int t) {
    gpt_tp_shard last = gpt_tp_block_shard(c, GPT_BLOCK_NTENSORS - 1, t, 0);
    return last.offset + (size_t)(last.rows * last.cols);
}

void gpt_tp_block_view(gpt_block_params *p, float *base, const gpt_config *c, int t) {
    for (int i = 0; i < GPT_BLOCK_NTENSORS; i++) p->t[i] = base + gpt_tp_block_shard(c, i, t, 0).offset;
    p->base = base;
    p->count = gpt_tp_block_count(c, t);
}

void gpt_tp_block_init_host(float *base, const gpt_config *c, int layer, int t, int r, uint64_t seed) {
    for (int i = 0; i < GPT_BLOCK_NTENSORS; i++) {
        gpt_tensor_info ti = gpt_tensor(c, GPT_PART_BLOCK, i, layer);
        gpt_tp_shard sh = gpt_tp_block_shard(c, i, t, r);
        pl_rng_fill_host(base + sh.offset, sh.rows, sh.cols, ti.cols, sh.row0, sh.col0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
    }
}

void gpt_tp_block_slice_host(float *dst, const gpt_block_params *whole, const gpt_config *c, int t, int r) {
    for (int i = 0; i < GPT_BLOCK_NTENSORS; i++) {
        gpt_tensor_info ti = gpt_tensor(c, GPT_PART_BLOCK, i, 0);
        gpt_tp_shard sh = gpt_tp_block_shard(c, i, t, r);
        for (int64_t row = 0; row < sh.rows; row++)
            memcpy(dst + sh.offset + row * sh.cols, whole->t[i] + (sh.row0 + row) * ti.cols + sh.col0,
                   (size_t)sh.cols * sizeof(float));
    }
}

/* ==================================================================================== */
/* Records and the workspace                                                              */
/* ==================================================================================== */

typedef struct {
    int T, B, C, Ct, H, hs, F, N, t;
    size_t NC, probs;
    float scale;
} dims;

static dims dims_of(const gpt_config *c, int t) {
    dims d = {.T = c->seq, .B = c->batch, .C = c->hidden, .H = c->heads / t, .F = c->ffn / t, .t = t};
    d.hs = c->hidden / c->heads;
    d.Ct = d.H * d.hs;
    d.N = d.T * d.B;
    d.NC = (size_t)d.N * d.C;
    d.probs = (size_t)d.B * d.H * d.T * d.T;
    d.scale = 1.0f / sqrtf((float)d.hs);
    return d;
}

struct gpt_tp_acts {
    gpt_config cfg;
    int t;
    bool ready; /* holds a forward waiting for its backward */
    float *base;
    float *x, *ln1, *x1, *ln2, *att, *qkv, *fc1, *gel, *probs, *mean1, *rstd1, *mean2, *rstd2;
};

struct gpt_tp_workspace {
    gpt_config cfg;
    int t;
    float *base;
    float *dln, *dx1, *datt, *dqkv, *dfc1, *dprobs;
};

#define TAKE(field, n)                          \
    do {                                        \
        if (v) v->field = base + off;           \
        off += (n);                             \
    } while (0)

static size_t acts_carve(gpt_tp_acts *v, float *base, const dims *d) {
    size_t off = 0, N = (size_t)d->N;
    TAKE(x, d->NC);
    TAKE(ln1, d->NC);
    TAKE(x1, d->NC);
    TAKE(ln2, d->NC);
    TAKE(att, N * d->Ct);
    TAKE(qkv, 3 * N * d->Ct);
    TAKE(fc1, N * d->F);
    TAKE(gel, N * d->F);
    TAKE(probs, d->probs);
    TAKE(mean1, N);
    TAKE(rstd1, N);
    TAKE(mean2, N);
    TAKE(rstd2, N);
    return off;
}

static size_t ws_carve(gpt_tp_workspace *v, float *base, const dims *d) {
    size_t off = 0, N = (size_t)d->N;
    TAKE(dln, d->NC);
    TAKE(dx1, d->NC);
    TAKE(datt, N * d->Ct);
    TAKE(dqkv, 3 * N * d->Ct);
    TAKE(dfc1, N * d->F);
    TAKE(dprobs, d->probs);
    return off;
}
#undef TAKE

size_t gpt_tp_acts_bytes(const gpt_config *c, int t) {
    require(c, t, "gpt_tp_acts_bytes");
    dims d = dims_of(c, t);
    return sizeof(float) * acts_carve(NULL, NULL, &d);
}

gpt_tp_acts *gpt_tp_acts_alloc(const gpt_config *c, int t) {
    require(c, t, "gpt_tp_acts_alloc");
    gpt_tp_acts *a = calloc(1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    dims d = dims_of(c, t);
    a->cfg = *c;
    a->t = t;
    a->base = pl_malloc(gpt_tp_acts_bytes(c, t));
    acts_carve(a, a->base, &d);
    return a;
}

void gpt_tp_acts_free(gpt_tp_acts *a) {
    if (!a) return;
    pl_free(a->base);
    free(a);
}

size_t gpt_tp_workspace_bytes(const gpt_config *c, int t) {
    require(c, t, "gpt_tp_workspace_bytes");
    dims d = dims_of(c, t);
    return sizeof(float) * ws_carve(NULL, NULL, &d);
}

gpt_tp_workspace *gpt_tp_workspace_alloc(const gpt_config *c, int t) {
    require(c, t, "gpt_tp_workspace_alloc");
    gpt_tp_workspace *ws = calloc(1, sizeof *ws);
    PL_CHECK(ws != NULL, "out of host memory");
    dims d = dims_of(c, t);
    ws->cfg = *c;
    ws->t = t;
    ws->base = pl_malloc(gpt_tp_workspace_bytes(c, t));
    ws_carve(ws, ws->base, &d);
    return ws;
}

void gpt_tp_workspace_free(gpt_tp_workspace *ws) {
    if (!ws) return;
    pl_free(ws->base);
    free(ws);
}

/* ==================================================================================== */
/* Forward and backward                                                                   */
/* ==================================================================================== */

static bool same_shape(const gpt_config *a, const gpt_config *b) {
    return a->seq == b->seq && a->batch == b->batch && a->hidden == b->hidden && a->heads == b->heads && a->ffn == b->ffn;
}

/* Parameters, record, workspace and group must all belong to one config and one t. */
static dims check_call(const char *who, const gpt_block_params *p, const gpt_tp_acts *a, const gpt_tp_workspace *ws,
                       pl_comm *tp) {
    if (!p || !a || !ws) fail(who, "NULL parameters, record or workspace");
    int t = tp ? pl_comm_size(tp) : 1;
    if (a->t != t || ws->t != t) fail(who, "record and workspace were made for t = %d and %d, the group has %d ranks", a->t, ws->t, t);
    if (!same_shape(&a->cfg, &ws->cfg)) fail(who, "record and workspace were allocated for different configs");
    if (p->count != gpt_tp_block_count(&a->cfg, t))
        fail(who, "the parameters hold %zu floats, a shard of this config at t = %d has %zu", p->count, t, gpt_tp_block_count(&a->cfg, t));
    return dims_of(&a->cfg, t);
}

/* y[N, out] = x[N, in] W^T (+ b), W [out, in] */
static void linear(float *y, const float *x, const float *w, const float *b, int N, int in, int out, pl_stream *s) {
    pl_gemm(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, s);
    if (b) kern_bias_forward(y, b, N, out, s);
}
/* dx[N, in] = dy[N, out] W; dW[out, in] += dy^T x; db += column sums of dy */
static void linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int N,
                            int in, int out, pl_stream *s) {
    pl_gemm(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, s);
    kern_bias_backward(db, dy, N, out, s);
    pl_gemm(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, s);
}

/* Megatron's g forward and f backward: the sum of the ranks' partial results. */
static void reduce(float *buf, size_t n, pl_comm *tp, pl_stream *s) {
    if (tp && pl_comm_size(tp) > 1) pl_allreduce(buf, buf, n, PL_SUM, tp, s);
}

void gpt_tp_block_forward(const gpt_block_params *p, gpt_tp_acts *a, float *y, const float *x, gpt_tp_workspace *ws,
                          pl_comm *tp, pl_stream *s) {
    const char *who = "gpt_tp_block_forward";
    dims d = check_call(who, p, a, ws, tp);
    if (!x || !y) fail(who, "NULL input or output");
    if (a->ready) fail(who, "the record holds a forward that has not been through its backward");
    int N = d.N, C = d.C, Ct = d.Ct, F = d.F;
    pl_region_begin("gpt_tp.block.F");
    pl_copy(a->x, x, d.NC * sizeof(float), s);
    kern_layernorm_forward(a->ln1, a->mean1, a->rstd1, a->x, p->ln1_w, p->ln1_b, N, C, GPT_LN_EPS, s);
    linear(a->qkv, a->ln1, p->qkv_w, p->qkv_b, N, C, 3 * Ct, s);
    kern_attention_forward(a->att, a->probs, a->qkv, d.T, d.B, d.H, d.hs, d.scale, s);
    linear(a->x1, a->att, p->proj_w, NULL, N, Ct, C, s); /* a partial sum over the heads */
    reduce(a->x1, d.NC, tp, s);
    kern_bias_forward(a->x1, p->proj_b, N, C, s); /* once, after the sum */
    kern_residual_forward(a->x1, a->x, a->x1, d.NC, s);
    kern_layernorm_forward(a->ln2, a->mean2, a->rstd2, a->x1, p->ln2_w, p->ln2_b, N, C, GPT_LN_EPS, s);
    linear(a->fc1, a->ln2, p->fc1_w, p->fc1_b, N, C, F, s);
    kern_gelu_forward(a->gel, a->fc1, (size_t)N * F, s);
    linear(y, a->gel, p->fc2_w, NULL, N, F, C, s);
    reduce(y, d.NC, tp, s);
    kern_bias_forward(y, p->fc2_b, N, C, s);
    kern_residual_forward(y, a->x1, y, d.NC, s);
    pl_region_end();
    a->ready = true;
}

void gpt_tp_block_backward(const gpt_block_params *p, gpt_block_params *g, gpt_tp_acts *a, float *dx, const float *dy,
                           gpt_tp_workspace *ws, pl_comm *tp, pl_stream *s) {
    const char *who = "gpt_tp_block_backward";
    dims d = check_call(who, p, a, ws, tp);
    if (!g || g->count != p->count) fail(who, "the gradient does not have the parameters' shape");
    if (!dx || !dy || dx == dy) fail(who, "dx and dy must be two distinct buffers");
    if (!a->ready) fail(who, "the record holds no forward (run gpt_tp_block_forward first)");
    int N = d.N, C = d.C, Ct = d.Ct, F = d.F;
    pl_region_begin("gpt_tp.block.BW");
    /* MLP: y = x1 + fc2(gelu(fc1(ln2(x1)))) */
    linear_backward(ws->dfc1, g->fc2_w, g->fc2_b, dy, a->gel, p->fc2_w, N, F, C, s);
    kern_gelu_backward(ws->dfc1, ws->dfc1, a->fc1, (size_t)N * F, s);
    linear_backward(ws->dln, g->fc1_w, g->fc1_b, ws->dfc1, a->ln2, p->fc1_w, N, C, F, s);
    reduce(ws->dln, d.NC, tp, s); /* every rank's slice of the MLP fed on ln2 */
    kern_layernorm_backward(ws->dx1, g->ln2_w, g->ln2_b, ws->dln, a->x1, p->ln2_w, a->mean2, a->rstd2, N, C, s);
    kern_residual_forward(ws->dx1, ws->dx1, dy, d.NC, s);
    /* attention: x1 = x + proj(attention(qkv(ln1(x)))) */
    linear_backward(ws->datt, g->proj_w, g->proj_b, ws->dx1, a->att, p->proj_w, N, Ct, C, s);
    kern_attention_backward(ws->dqkv, ws->dprobs, ws->datt, a->qkv, a->probs, d.T, d.B, d.H, d.hs, d.scale, s);
    linear_backward(ws->dln, g->qkv_w, g->qkv_b, ws->dqkv, a->ln1, p->qkv_w, N, C, 3 * Ct, s);
    reduce(ws->dln, d.NC, tp, s); /* every rank's heads fed on ln1 */
    kern_layernorm_backward(dx, g->ln1_w, g->ln1_b, ws->dln, a->x, p->ln1_w, a->mean1, a->rstd1, N, C, s);
    kern_residual_forward(dx, dx, ws->dx1, d.NC, s);
    pl_region_end();
    a->ready = false;
}
