/* gpt_host.c - the host reference of the GPT-2 model: plain loops, float32 storage, double
 * accumulation. Written from the formulas (docs/models.md), not from kernels/, so that a
 * comparison with the device model checks two independent computations. */
#include "gpt_host.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pl_rng.h"     // defines: pl_rng_fill_host
#include "pl_runtime.h" // defines: pl_fatal

/* ==================================================================================== */
/* Memory and parameters                                                                  */
/* ==================================================================================== */

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n + 1, size); /* + 1: a zero-size tensor still gets a pointer */
    if (!p) pl_fatal(__FILE__, __LINE__, "calloc", "out of host memory");
    return p;
}
static float *fzalloc(size_t n) { return zalloc(n, sizeof(float)); }
static double *dzalloc(size_t n) { return zalloc(n, sizeof(double)); }

static void check_config(const gpt_config *c, bool vocab, const char *who) {
    char why[200];
    if (!gpt_config_valid(c, why, sizeof why)) pl_fatal(__FILE__, __LINE__, who, why);
    if (vocab && c->vocab < 1) pl_fatal(__FILE__, __LINE__, who, "the embedding and the head need vocab >= 1");
}

static void host_params(float **t, float **base, size_t *count, const gpt_config *c, gpt_part part,
                        const char *who) {
    check_config(c, part != GPT_PART_BLOCK, who);
    *count = gpt_part_count(c, part);
    *base = fzalloc(*count);
    for (int i = 0; i < gpt_part_ntensors(part); i++) t[i] = *base + gpt_tensor(c, part, i, 0).offset;
}

static void host_init(float *const *t, size_t count, const gpt_config *c, gpt_part part, int layer,
                      uint64_t seed, const char *who) {
    if (count != gpt_part_count(c, part))
        pl_fatal(__FILE__, __LINE__, who, "the parameters were allocated for another config");
    for (int i = 0; i < gpt_part_ntensors(part); i++) {
        gpt_tensor_info ti = gpt_tensor(c, part, i, layer);
        pl_rng_fill_host(t[i], ti.rows, ti.cols, ti.cols, 0, 0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
    }
}

void gpt_host_block_alloc(gpt_block_params *p, const gpt_config *c) {
    host_params(p->t, &p->base, &p->count, c, GPT_PART_BLOCK, "gpt_host_block_alloc");
}
void gpt_host_embed_alloc(gpt_embed_params *p, const gpt_config *c) {
    host_params(p->t, &p->base, &p->count, c, GPT_PART_EMBED, "gpt_host_embed_alloc");
}
void gpt_host_head_alloc(gpt_head_params *p, const gpt_config *c) {
    host_params(p->t, &p->base, &p->count, c, GPT_PART_HEAD, "gpt_host_head_alloc");
}
void gpt_host_params_free(float *base) { free(base); }
void gpt_host_block_init(gpt_block_params *p, const gpt_config *c, int layer, uint64_t seed) {
    host_init(p->t, p->count, c, GPT_PART_BLOCK, layer, seed, "gpt_host_block_init");
}
void gpt_host_embed_init(gpt_embed_params *p, const gpt_config *c, uint64_t seed) {
    host_init(p->t, p->count, c, GPT_PART_EMBED, 0, seed, "gpt_host_embed_init");
}
void gpt_host_head_init(gpt_head_params *p, const gpt_config *c, uint64_t seed) {
    host_init(p->t, p->count, c, GPT_PART_HEAD, 0, seed, "gpt_host_head_init");
}

void gpt_host_acts_alloc(gpt_host_acts *a, const gpt_config *c) {
    check_config(c, false, "gpt_host_acts_alloc");
    size_t N = (size_t)c->seq * c->batch, C = c->hidden, F = c->ffn;
    a->x = fzalloc(N * C), a->ln1 = fzalloc(N * C), a->qkv = fzalloc(N * 3 * C);
    a->att = fzalloc(N * C), a->x1 = fzalloc(N * C), a->ln2 = fzalloc(N * C);
    a->fc1 = fzalloc(N * F), a->gel = fzalloc(N * F);
    a->mean1 = fzalloc(N), a->rstd1 = fzalloc(N), a->mean2 = fzalloc(N), a->rstd2 = fzalloc(N);
    a->probs = fzalloc((size_t)c->batch * c->heads * c->seq * c->seq);
}

void gpt_host_acts_free(gpt_host_acts *a) {
    float *all[] = {a->x, a->ln1, a->qkv, a->att, a->x1, a->ln2, a->fc1, a->gel,
                    a->mean1, a->rstd1, a->mean2, a->rstd2, a->probs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    memset(a, 0, sizeof *a);
}

/* ==================================================================================== */
/* Layers                                                                                 */
/* ==================================================================================== */

/* out = (x - mean) / sqrt(var + eps) * w + b per row (biased variance, two passes). */
static void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                              const float *b, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += xi[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (xi[c] - m) * (xi[c] - m);
        v /= C;
        double r = 1.0 / sqrt(v + (double)GPT_LN_EPS);
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = (float)((xi[c] - m) * r * w[c] + b[c]);
        mean[i] = (float)m;
        rstd[i] = (float)r;
    }
}

/* dx = r (g - mean(g) - xhat mean(g xhat)) + residual, g = dout * w, xhat = (x - mean) r;
 * dw += sum over rows of dout xhat, db += sum of dout. residual may be NULL. */
static void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                               const float *w, const float *mean, const float *rstd,
                               const float *residual, int N, int C) {
    double *accw = dzalloc(C), *accb = dzalloc(C);
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *gi = dout + (size_t)i * C;
        double m = mean[i], r = rstd[i], gmean = 0, gxmean = 0;
        for (int c = 0; c < C; c++) {
            double xhat = (xi[c] - m) * r, g = (double)gi[c] * w[c];
            gmean += g;
            gxmean += g * xhat;
            accw[c] += gi[c] * xhat;
            accb[c] += gi[c];
        }
        gmean /= C;
        gxmean /= C;
        for (int c = 0; c < C; c++) {
            double xhat = (xi[c] - m) * r, g = (double)gi[c] * w[c];
            double v = r * (g - gmean - xhat * gxmean);
            if (residual) v += residual[(size_t)i * C + c];
            dx[(size_t)i * C + c] = (float)v;
        }
    }
    for (int c = 0; c < C; c++) {
        dw[c] += (float)accw[c];
        db[c] += (float)accb[c];
    }
    free(accw);
    free(accb);
}

/* y[N, out] = x[N, in] W^T + b (+ residual), W [out, in]. */
static void linear_forward(float *y, const float *x, const float *W, const float *b,
                           const float *residual, int N, int in, int out) {
    for (int i = 0; i < N; i++)
        for (int o = 0; o < out; o++) {
            const float *xi = x + (size_t)i * in, *wo = W + (size_t)o * in;
            double acc = b[o];
            for (int k = 0; k < in; k++) acc += (double)xi[k] * wo[k];
            if (residual) acc += residual[(size_t)i * out + o];
            y[(size_t)i * out + o] = (float)acc;
        }
}

/* dx[N, in] = dy W (written); dW[out, in] += dy^T x; db[out] += column sums of dy. */
static void linear_backward(float *dx, float *dW, float *db, const float *dy, const float *x,
                            const float *W, int N, int in, int out) {
    for (int i = 0; i < N; i++)
        for (int k = 0; k < in; k++) {
            double acc = 0;
            for (int o = 0; o < out; o++) acc += (double)dy[(size_t)i * out + o] * W[(size_t)o * in + k];
            dx[(size_t)i * in + k] = (float)acc;
        }
    for (int o = 0; o < out; o++) {
        double accb = 0;
        for (int i = 0; i < N; i++) accb += dy[(size_t)i * out + o];
        db[o] += (float)accb;
        for (int k = 0; k < in; k++) {
            double acc = 0;
            for (int i = 0; i < N; i++) acc += (double)dy[(size_t)i * out + o] * x[(size_t)i * in + k];
            dW[(size_t)o * in + k] += (float)acc;
        }
    }
}

/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
#define GELU_K 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_C 0.044715

static void gelu_forward(float *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = in[i];
        out[i] = (float)(0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x))));
    }
}

static void gelu_backward(float *dx, const float *dy, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = in[i], t = tanh(GELU_K * (x + GELU_C * x * x * x));
        double d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        dx[i] = (float)(dy[i] * d);
    }
}

/* Causal attention over qkv [T, b, 3C] (head h: q, k, v in columns 3 hs h + [0, hs),
 * [hs, 2hs), [2hs, 3hs)); out [T, b, C] (head h in columns hs h + [0, hs)); probs
 * [b, H, T, T] with zeros above the diagonal. */
typedef struct {
    int T, B, H, hs, C;
    double scale;
} att_shape;

static att_shape att_of(const gpt_config *c) {
    att_shape s = {c->seq, c->batch, c->heads, c->hidden / c->heads, c->hidden, 0};
    s.scale = 1.0 / sqrt((double)s.hs);
    return s;
}
static size_t qkv_at(const att_shape *s, int t, int j, int h, int part) { /* part: 0 q, 1 k, 2 v */
    return ((size_t)t * s->B + j) * 3 * s->C + (size_t)3 * s->hs * h + (size_t)part * s->hs;
}

static void attention_forward(float *out, float *probs, const float *qkv, const att_shape *s) {
    int T = s->T, hs = s->hs;
    double *p = dzalloc(T);
    for (int j = 0; j < s->B; j++)
        for (int h = 0; h < s->H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + qkv_at(s, t, j, h, 0);
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + qkv_at(s, u, j, h, 1);
                    double dot = 0;
                    for (int e = 0; e < hs; e++) dot += (double)q[e] * k[e];
                    p[u] = s->scale * dot;
                    if (p[u] > mx) mx = p[u];
                }
                for (int u = 0; u <= t; u++) sum += (p[u] = exp(p[u] - mx));
                float *P = probs + (((size_t)j * s->H + h) * T + t) * T;
                for (int u = 0; u < T; u++) P[u] = u <= t ? (float)(p[u] / sum) : 0.0f;
                float *o = out + ((size_t)t * s->B + j) * s->C + (size_t)hs * h;
                for (int e = 0; e < hs; e++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++) acc += p[u] / sum * qkv[qkv_at(s, u, j, h, 2) + e];
                    o[e] = (float)acc;
                }
            }
    free(p);
}

/* dqkv (written) from dout, with dP = dO V^T, dS = P (dP - rowsum(P dP)) scale,
 * dq = dS K, dk = dS^T Q, dv = P^T dO; sums in double. */
static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *probs,
                               const att_shape *s) {
    int T = s->T, hs = s->hs;
    size_t n = (size_t)T * s->B * 3 * s->C;
    double *acc = dzalloc(n), *dS = dzalloc(T);
    for (int j = 0; j < s->B; j++)
        for (int h = 0; h < s->H; h++)
            for (int t = 0; t < T; t++) {
                const float *P = probs + (((size_t)j * s->H + h) * T + t) * T;
                const float *dO = dout + ((size_t)t * s->B + j) * s->C + (size_t)hs * h;
                double rowsum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + qkv_at(s, u, j, h, 2);
                    double dp = 0;
                    for (int e = 0; e < hs; e++) {
                        dp += (double)dO[e] * v[e];
                        acc[qkv_at(s, u, j, h, 2) + e] += (double)P[u] * dO[e];
                    }
                    dS[u] = dp;
                    rowsum += P[u] * dp;
                }
                for (int u = 0; u <= t; u++) dS[u] = s->scale * P[u] * (dS[u] - rowsum);
                for (int u = 0; u <= t; u++)
                    for (int e = 0; e < hs; e++) {
                        acc[qkv_at(s, t, j, h, 0) + e] += dS[u] * qkv[qkv_at(s, u, j, h, 1) + e];
                        acc[qkv_at(s, u, j, h, 1) + e] += dS[u] * qkv[qkv_at(s, t, j, h, 0) + e];
                    }
            }
    for (size_t i = 0; i < n; i++) dqkv[i] = (float)acc[i];
    free(acc);
    free(dS);
}

/* ==================================================================================== */
/* The block                                                                              */
/* ==================================================================================== */

void gpt_host_block_forward(const gpt_config *c, const gpt_block_params *p, gpt_host_acts *a,
                            float *y, const float *x) {
    int N = c->seq * c->batch, C = c->hidden, F = c->ffn;
    att_shape s = att_of(c);
    memcpy(a->x, x, (size_t)N * C * sizeof(float));
    layernorm_forward(a->ln1, a->mean1, a->rstd1, a->x, p->ln1_w, p->ln1_b, N, C);
    linear_forward(a->qkv, a->ln1, p->qkv_w, p->qkv_b, NULL, N, C, 3 * C);
    attention_forward(a->att, a->probs, a->qkv, &s);
    linear_forward(a->x1, a->att, p->proj_w, p->proj_b, a->x, N, C, C);
    layernorm_forward(a->ln2, a->mean2, a->rstd2, a->x1, p->ln2_w, p->ln2_b, N, C);
    linear_forward(a->fc1, a->ln2, p->fc1_w, p->fc1_b, NULL, N, C, F);
    gelu_forward(a->gel, a->fc1, (size_t)N * F);
    linear_forward(y, a->gel, p->fc2_w, p->fc2_b, a->x1, N, F, C);
}

void gpt_host_block_backward(const gpt_config *c, const gpt_block_params *p, gpt_block_params *g,
                             const gpt_host_acts *a, float *dx, const float *dy) {
    int N = c->seq * c->batch, C = c->hidden, F = c->ffn;
    size_t NC = (size_t)N * C;
    att_shape s = att_of(c);
    float *dfc1 = fzalloc((size_t)N * F), *dh = fzalloc(NC), *dx1 = fzalloc(NC);
    float *datt = fzalloc(NC), *dqkv = fzalloc(NC * 3);
    /* MLP half */
    linear_backward(dfc1, g->fc2_w, g->fc2_b, dy, a->gel, p->fc2_w, N, F, C);
    gelu_backward(dfc1, dfc1, a->fc1, (size_t)N * F);
    linear_backward(dh, g->fc1_w, g->fc1_b, dfc1, a->ln2, p->fc1_w, N, C, F);
    layernorm_backward(dx1, g->ln2_w, g->ln2_b, dh, a->x1, p->ln2_w, a->mean2, a->rstd2, dy, N, C);
    /* attention half */
    linear_backward(datt, g->proj_w, g->proj_b, dx1, a->att, p->proj_w, N, C, C);
    attention_backward(dqkv, datt, a->qkv, a->probs, &s);
    linear_backward(dh, g->qkv_w, g->qkv_b, dqkv, a->ln1, p->qkv_w, N, C, 3 * C);
    layernorm_backward(dx, g->ln1_w, g->ln1_b, dh, a->x, p->ln1_w, a->mean1, a->rstd1, dx1, N, C);
    free(dfc1);
    free(dh);
    free(dx1);
    free(datt);
    free(dqkv);
}

/* ==================================================================================== */
/* Embedding                                                                              */
/* ==================================================================================== */

static void check_ids(const int *ids, size_t n, int vocab, const char *who) {
    char why[160];
    if (!gpt_ids_valid(ids, n, vocab, why, sizeof why)) pl_fatal(__FILE__, __LINE__, who, why);
}

void gpt_host_embed_forward(const gpt_config *c, const gpt_embed_params *p, float *x,
                            const int *tokens) {
    check_config(c, true, "gpt_host_embed_forward");
    int T = c->seq, B = c->batch, C = c->hidden;
    if (c->max_pos < T) pl_fatal(__FILE__, __LINE__, "gpt_host_embed_forward", "max_pos is shorter than seq");
    check_ids(tokens, (size_t)T * B, c->vocab, "gpt_host_embed_forward");
    for (int t = 0; t < T; t++)
        for (int j = 0; j < B; j++) {
            const float *e = p->wte + (size_t)tokens[t * B + j] * C, *q = p->wpe + (size_t)t * C;
            float *o = x + ((size_t)t * B + j) * C;
            for (int k = 0; k < C; k++) o[k] = e[k] + q[k];
        }
}

typedef struct {
    int token, row;
} token_row;
static int by_token(const void *a, const void *b) {
    const token_row *x = a, *y = b;
    return x->token != y->token ? (x->token < y->token ? -1 : 1) : x->row - y->row;
}

void gpt_host_embed_backward(const gpt_config *c, gpt_embed_params *g, const float *dx,
                             const int *tokens) {
    check_config(c, true, "gpt_host_embed_backward");
    int T = c->seq, B = c->batch, C = c->hidden, N = T * B;
    if (c->max_pos < T) pl_fatal(__FILE__, __LINE__, "gpt_host_embed_backward", "max_pos is shorter than seq");
    check_ids(tokens, (size_t)N, c->vocab, "gpt_host_embed_backward");
    double *acc = dzalloc(C);
    /* a token's rows, grouped by sorting, summed in double before touching dwte */
    token_row *order = zalloc(N, sizeof *order);
    for (int i = 0; i < N; i++) order[i] = (token_row){tokens[i], i};
    qsort(order, N, sizeof *order, by_token);
    for (int i = 0; i < N;) {
        int tok = order[i].token;
        memset(acc, 0, (size_t)C * sizeof(double));
        for (; i < N && order[i].token == tok; i++)
            for (int k = 0; k < C; k++) acc[k] += dx[(size_t)order[i].row * C + k];
        for (int k = 0; k < C; k++) g->wte[(size_t)tok * C + k] += (float)acc[k];
    }
    for (int t = 0; t < T; t++) {
        memset(acc, 0, (size_t)C * sizeof(double));
        for (int j = 0; j < B; j++)
            for (int k = 0; k < C; k++) acc[k] += dx[((size_t)t * B + j) * C + k];
        for (int k = 0; k < C; k++) g->wpe[(size_t)t * C + k] += (float)acc[k];
    }
    free(order);
    free(acc);
}

/* ==================================================================================== */
/* Loss head                                                                              */
/* ==================================================================================== */

void gpt_host_head_acts_alloc(gpt_host_head_acts *a, const gpt_config *c) {
    check_config(c, true, "gpt_host_head_acts_alloc");
    size_t N = (size_t)c->seq * c->batch;
    a->x = fzalloc(N * c->hidden), a->lnf = fzalloc(N * c->hidden);
    a->mean = fzalloc(N), a->rstd = fzalloc(N), a->probs = fzalloc(N * c->vocab);
    a->targets = zalloc(N, sizeof(int));
}

void gpt_host_head_acts_free(gpt_host_head_acts *a) {
    free(a->x);
    free(a->lnf);
    free(a->mean);
    free(a->rstd);
    free(a->probs);
    free(a->targets);
    memset(a, 0, sizeof *a);
}

double gpt_host_head_forward(const gpt_config *c, const gpt_head_params *p, gpt_host_head_acts *a,
                             const float *x, const int *targets) {
    check_config(c, true, "gpt_host_head_forward");
    int N = c->seq * c->batch, C = c->hidden, V = c->vocab;
    check_ids(targets, (size_t)N, V, "gpt_host_head_forward");
    memcpy(a->x, x, (size_t)N * C * sizeof(float));
    memcpy(a->targets, targets, (size_t)N * sizeof(int));
    layernorm_forward(a->lnf, a->mean, a->rstd, a->x, p->lnf_w, p->lnf_b, N, C);
    double *z = dzalloc(V), loss = 0;
    for (int i = 0; i < N; i++) {
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) {
            double acc = 0;
            for (int k = 0; k < C; k++) acc += (double)a->lnf[(size_t)i * C + k] * p->lm_w[(size_t)v * C + k];
            z[v] = acc;
            if (acc > mx) mx = acc;
        }
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        for (int v = 0; v < V; v++) a->probs[(size_t)i * V + v] = (float)(exp(z[v] - mx) / sum);
        loss += log(sum) + mx - z[targets[i]];
    }
    free(z);
    return loss / N;
}

void gpt_host_head_backward(const gpt_config *c, const gpt_head_params *p, gpt_head_params *g,
                            const gpt_host_head_acts *a, float *dx, float loss_scale) {
    check_config(c, true, "gpt_host_head_backward");
    int N = c->seq * c->batch, C = c->hidden, V = c->vocab;
    /* d(loss_scale * mean loss) / dlogits = loss_scale (probs - onehot) / N */
    double *dz = dzalloc((size_t)N * V);
    for (int i = 0; i < N; i++)
        for (int v = 0; v < V; v++)
            dz[(size_t)i * V + v] = (double)loss_scale * (a->probs[(size_t)i * V + v] - (v == a->targets[i])) / N;
    for (int v = 0; v < V; v++)
        for (int k = 0; k < C; k++) {
            double acc = 0;
            for (int i = 0; i < N; i++) acc += dz[(size_t)i * V + v] * a->lnf[(size_t)i * C + k];
            g->lm_w[(size_t)v * C + k] += (float)acc;
        }
    float *dlnf = fzalloc((size_t)N * C);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < C; k++) {
            double acc = 0;
            for (int v = 0; v < V; v++) acc += dz[(size_t)i * V + v] * p->lm_w[(size_t)v * C + k];
            dlnf[(size_t)i * C + k] = (float)acc;
        }
    layernorm_backward(dx, g->lnf_w, g->lnf_b, dlnf, a->x, p->lnf_w, a->mean, a->rstd, NULL, N, C);
    free(dlnf);
    free(dz);
}

double gpt_host_head_loss(const gpt_config *c, const gpt_head_params *p, const float *x,
                          const int *targets) {
    check_config(c, true, "gpt_host_head_loss");
    int N = c->seq * c->batch, C = c->hidden, V = c->vocab;
    check_ids(targets, (size_t)N, V, "gpt_host_head_loss");
    double *h = dzalloc(C), *z = dzalloc(V), loss = 0;
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double m = 0, var = 0;
        for (int k = 0; k < C; k++) m += xi[k];
        m /= C;
        for (int k = 0; k < C; k++) var += (xi[k] - m) * (xi[k] - m);
        var /= C;
        double r = 1.0 / sqrt(var + (double)GPT_LN_EPS), mx = -INFINITY, sum = 0;
        for (int k = 0; k < C; k++) h[k] = (xi[k] - m) * r * p->lnf_w[k] + p->lnf_b[k];
        for (int v = 0; v < V; v++) {
            z[v] = 0;
            for (int k = 0; k < C; k++) z[v] += h[k] * p->lm_w[(size_t)v * C + k];
            if (z[v] > mx) mx = z[v];
        }
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        loss += log(sum) + mx - z[targets[i]];
    }
    free(h);
    free(z);
    return loss / N;
}
