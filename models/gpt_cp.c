/* gpt_cp.c - the GPT-2 block over a context-parallel group (gpt_cp.h): the token-wise
 * pieces on this rank's rows, the fused QKV split into the attention's q, k, v and its
 * gradients joined back, and the parameter gradients summed over the group. Plain C over
 * the kernels/ dispatchers, pl_gemm and the library all-reduce, so it runs on the cpu and
 * the cuda device. */
#include "gpt_cp.h"

#include <stdio.h>
#include <stdlib.h>

#include "kern_bias.h"      // defines: kern_bias_forward, kern_bias_backward
#include "kern_gather.h"    // defines: kern_gather_rows
#include "kern_gelu.h"      // defines: kern_gelu_forward, kern_gelu_backward
#include "kern_layernorm.h" // defines: kern_layernorm_forward, kern_layernorm_backward
#include "kern_residual.h"  // defines: kern_residual_forward
#include "pl_runtime.h"     // defines: pl_fatal, PL_CHECK
#include "pl_trace.h"       // defines: pl_region_begin, pl_region_end

#define fail(who, ...) pl_fatalf(__FILE__, __LINE__, (who), __VA_ARGS__)

bool gpt_cp_config_valid(const gpt_config *c, int rows, char *why, size_t why_len) {
    if (!gpt_config_valid(c, why, why_len)) return false;
    const char *bad = c->batch != 1 ? "batch must be 1 (one sequence split by positions)"
                      : rows < 1 || rows > c->seq ? "the local rows must be between 1 and the sequence's length"
                                                  : NULL;
    if (bad && why && why_len) snprintf(why, why_len, "%s: batch %d, rows %d, seq %d", bad, c->batch, rows, c->seq);
    return bad == NULL;
}

static void require(const gpt_config *c, int rows, const char *who) {
    char why[200];
    if (!gpt_cp_config_valid(c, rows, why, sizeof why)) fail(who, "%s", why);
}

struct gpt_cp_acts {
    gpt_config cfg;
    int R, C, H, hs, F;
    bool full;        /* holds a forward that waits for its backward */
    float *base;      /* one pl_malloc, the tensors below             */
    float *x, *ln1, *x1, *ln2, *qkv, *qs, *att, *lse, *fc1, *gel, *mean1, *rstd1, *mean2, *rstd2;
    int *idx;         /* [2 * 3RH]: split (qkv rows -> q | k | v rows), then join (back) */
};

static size_t acts_floats(const gpt_config *c, int R) {
    size_t C = (size_t)c->hidden, F = (size_t)c->ffn, H = (size_t)c->heads;
    return (size_t)R * (12 * C + 2 * F + H + 4);
}

size_t gpt_cp_acts_bytes(const gpt_config *c, int rows) {
    require(c, rows, "gpt_cp_acts_bytes");
    return sizeof(float) * acts_floats(c, rows);
}

gpt_cp_acts *gpt_cp_acts_alloc(const gpt_config *c, int rows) {
    require(c, rows, "gpt_cp_acts_alloc");
    gpt_cp_acts *a = calloc(1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    a->cfg = *c, a->R = rows, a->C = c->hidden, a->H = c->heads, a->hs = c->hidden / c->heads, a->F = c->ffn;
    size_t R = (size_t)rows, C = (size_t)a->C, F = (size_t)a->F, H = (size_t)a->H;
    float *p = a->base = pl_malloc_floats(acts_floats(c, rows));
    /* [R, C]-sized tensors first, the [R, H] and [R] statistics last */
    a->x = p, p += R * C;
    a->ln1 = p, p += R * C;
    a->x1 = p, p += R * C;
    a->ln2 = p, p += R * C;
    a->qkv = p, p += 3 * R * C;
    a->qs = p, p += 3 * R * C;
    a->att = p, p += R * C;
    a->fc1 = p, p += R * F;
    a->gel = p, p += R * F;
    a->lse = p, p += R * H;
    a->mean1 = p, p += R;
    a->rstd1 = p, p += R;
    a->mean2 = p, p += R;
    a->rstd2 = p;
    /* rows of hs floats: qkv row (t H + h) 3 + j is row j R H + t H + h of q | k | v */
    size_t n = 3 * R * H;
    int *host = malloc(2 * n * sizeof *host);
    PL_CHECK(host != NULL, "out of host memory");
    for (size_t t = 0; t < R; t++)
        for (size_t h = 0; h < H; h++)
            for (size_t j = 0; j < 3; j++) {
                size_t fused = (t * H + h) * 3 + j, split = j * R * H + t * H + h;
                host[split] = (int)fused;
                host[n + fused] = (int)split;
            }
    a->idx = pl_malloc(2 * n * sizeof(int));
    pl_upload(a->idx, host, 2 * n * sizeof(int));
    free(host);
    return a;
}

void gpt_cp_acts_free(gpt_cp_acts *a) {
    if (!a) return;
    pl_free(a->base);
    pl_free(a->idx);
    free(a);
}

static void check_call(const char *who, const gpt_block_params *p, const gpt_cp_acts *a, const gpt_cp_attention *attn) {
    if (!p || !a || !attn || !attn->forward || !attn->backward) fail(who, "NULL parameters, record or attention");
    size_t want = gpt_part_count(&a->cfg, GPT_PART_BLOCK);
    if (p->count != want) fail(who, "the parameters hold %zu floats, the record's config needs %zu", p->count, want);
}

static void linear_forward(float *y, const float *x, const float *w, const float *b, int N, int in, int out,
                           pl_stream *s) {
    pl_gemm(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, s);
    kern_bias_forward(y, b, N, out, s);
}

/* dx = dy W (written); dW += dy^T x and db += column sums of dy */
static void linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int N,
                            int in, int out, pl_stream *s) {
    pl_gemm(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, s);
    kern_bias_backward(db, dy, N, out, s);
    pl_gemm(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, s);
}

void gpt_cp_block_forward(const gpt_block_params *p, gpt_cp_acts *a, float *y, const float *x,
                          const gpt_cp_attention *attn, pl_stream *s) {
    const char *who = "gpt_cp_block_forward";
    check_call(who, p, a, attn);
    if (a->full) fail(who, "the record holds a forward that has not been through its backward");
    int R = a->R, C = a->C, F = a->F, RH = R * a->H;
    size_t RC = (size_t)R * C;
    pl_region_begin("gpt_cp.block.F");
    pl_copy(a->x, x, RC * sizeof(float), s);
    kern_layernorm_forward(a->ln1, a->mean1, a->rstd1, a->x, p->ln1_w, p->ln1_b, R, C, GPT_LN_EPS, s);
    linear_forward(a->qkv, a->ln1, p->qkv_w, p->qkv_b, R, C, 3 * C, s);
    kern_gather_rows(a->qs, a->qkv, a->idx, 3 * RH, a->hs, s);
    attn->forward(attn->ctx, a->qs, a->qs + RC, a->qs + 2 * RC, a->att, a->lse, s);
    linear_forward(a->x1, a->att, p->proj_w, p->proj_b, R, C, C, s);
    kern_residual_forward(a->x1, a->x, a->x1, RC, s);
    kern_layernorm_forward(a->ln2, a->mean2, a->rstd2, a->x1, p->ln2_w, p->ln2_b, R, C, GPT_LN_EPS, s);
    linear_forward(a->fc1, a->ln2, p->fc1_w, p->fc1_b, R, C, F, s);
    kern_gelu_forward(a->gel, a->fc1, (size_t)R * F, s);
    linear_forward(y, a->gel, p->fc2_w, p->fc2_b, R, F, C, s);
    kern_residual_forward(y, a->x1, y, RC, s);
    pl_region_end();
    a->full = true;
}

void gpt_cp_block_backward(const gpt_block_params *p, gpt_block_params *g, gpt_cp_acts *a, float *dx,
                           const float *dy, const gpt_cp_attention *attn, pl_comm *cp, pl_stream *s) {
    const char *who = "gpt_cp_block_backward";
    check_call(who, p, a, attn);
    if (!g || g->count != p->count) fail(who, "the gradients must hold the parameters' %zu floats", p->count);
    if (!a->full) fail(who, "the backward needs the record's forward (run gpt_cp_block_forward first)");
    if (dx == dy) fail(who, "dx must not alias dy");
    int R = a->R, C = a->C, F = a->F, RH = R * a->H;
    size_t RC = (size_t)R * C, RF = (size_t)R * F;
    /* temporaries: dfc1 [R, F]; dh2, dx1, datt, dh1 [R, C]; dq | dk | dv and dqkv [R, 3C];
     * this rank's share of the parameter gradients */
    float *tmp = pl_malloc_floats(RF + 10 * RC + p->count), *dfc1 = tmp, *dh2 = dfc1 + RF, *dx1 = dh2 + RC,
          *datt = dx1 + RC, *dh1 = datt + RC, *dqs = dh1 + RC, *dqkv = dqs + 3 * RC, *share = dqkv + 3 * RC;
    gpt_block_params gl = *p;
    for (int i = 0; i < GPT_BLOCK_NTENSORS; i++) gl.t[i] = share + (p->t[i] - p->base);
    gl.base = share;
    pl_fill(share, 0.0f, p->count, s);
    pl_region_begin("gpt_cp.block.BW");
    /* MLP half: y = x1 + fc2(gelu(fc1(ln2(x1)))) */
    linear_backward(dfc1, gl.fc2_w, gl.fc2_b, dy, a->gel, p->fc2_w, R, F, C, s);
    kern_gelu_backward(dfc1, dfc1, a->fc1, RF, s);
    linear_backward(dh2, gl.fc1_w, gl.fc1_b, dfc1, a->ln2, p->fc1_w, R, C, F, s);
    kern_layernorm_backward(dx1, gl.ln2_w, gl.ln2_b, dh2, a->x1, p->ln2_w, a->mean2, a->rstd2, R, C, s);
    kern_residual_forward(dx1, dx1, dy, RC, s);
    /* attention half: x1 = x + proj(attention(qkv(ln1(x)))) */
    linear_backward(datt, gl.proj_w, gl.proj_b, dx1, a->att, p->proj_w, R, C, C, s);
    attn->backward(attn->ctx, a->qs, a->qs + RC, a->qs + 2 * RC, a->att, a->lse, datt, dqs, dqs + RC, dqs + 2 * RC, s);
    kern_gather_rows(dqkv, dqs, a->idx + 3 * (size_t)RH, 3 * RH, a->hs, s);
    linear_backward(dh1, gl.qkv_w, gl.qkv_b, dqkv, a->ln1, p->qkv_w, R, C, 3 * C, s);
    kern_layernorm_backward(dx, gl.ln1_w, gl.ln1_b, dh1, a->x, p->ln1_w, a->mean1, a->rstd1, R, C, s);
    kern_residual_forward(dx, dx, dx1, RC, s);
    pl_region_end();
    /* the whole sequence's gradients: every rank's share, summed */
    if (cp && pl_comm_size(cp) > 1) pl_allreduce(share, share, p->count, PL_SUM, cp, s);
    pl_reduce_local(g->base, share, p->count, PL_SUM, s);
    pl_stream_sync(s);
    pl_free(tmp);
    a->full = false;
}
