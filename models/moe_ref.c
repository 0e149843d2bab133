/* moe_ref.c - the reference mixture-of-experts layer in float64 (internal/moe_ref.h says
 * the math). Plain loops, one token and one assignment at a time: slow, and as direct a
 * transcription of the definitions as possible. */
#include "internal/moe_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pl_runtime.h" // defines: PL_CHECK

int llm_moe_capacity(const llm_moe_shape *s) {
    return (int)ceil((double)s->tokens * s->top_k / s->experts * s->capacity_factor);
}

void llm_moe_routing_alloc(llm_moe_routing *r, const llm_moe_shape *s) {
    size_t T = (size_t)s->tokens, E = (size_t)s->experts, k = (size_t)s->top_k;
    r->probs = calloc(T * E + 1, sizeof *r->probs);
    r->expert = calloc(T * k + 1, sizeof *r->expert);
    r->gate = calloc(T * k + 1, sizeof *r->gate);
    r->keep = calloc(T * k + 1, sizeof *r->keep);
    PL_CHECK(r->probs && r->expert && r->gate && r->keep, "out of host memory");
    r->aux = 0;
}

void llm_moe_routing_free(llm_moe_routing *r) {
    free(r->probs);
    free(r->expert);
    free(r->gate);
    free(r->keep);
    memset(r, 0, sizeof *r);
}

/* ---- routing -------------------------------------------------------------------------- */

typedef struct {
    double p;
    int t, j;
} candidate;

/* Larger probability first; ties: lower token, then lower j. */
static int by_priority(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

void llm_moe_route(const llm_moe_shape *s, const double *logits, llm_moe_routing *r) {
    int T = s->tokens, E = s->experts, k = s->top_k;
    for (int t = 0; t < T; t++) {
        const double *l = logits + (size_t)t * E;
        double *p = r->probs + (size_t)t * E, mx = l[0], sum = 0;
        for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; e++) sum += p[e] = exp(l[e] - mx);
        for (int e = 0; e < E; e++) p[e] /= sum;
        double chosen = 0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < j; q++) taken |= r->expert[t * k + q] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e; /* strict: ties to the lower index */
            }
            r->expert[t * k + j] = best;
            chosen += p[best];
        }
        for (int j = 0; j < k; j++) r->gate[t * k + j] = p[r->expert[t * k + j]] / chosen;
    }
    /* capacity, per expert: the C most probable assignments stay */
    int C = llm_moe_capacity(s);
    candidate *c = malloc(((size_t)T * k + 1) * sizeof *c);
    PL_CHECK(c != NULL, "out of host memory");
    for (int e = 0; e < E; e++) {
        int m = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (r->expert[t * k + j] == e) c[m++] = (candidate){r->probs[(size_t)t * E + e], t, j};
        qsort(c, (size_t)m, sizeof *c, by_priority);
        for (int i = 0; i < m; i++) r->keep[c[i].t * k + c[i].j] = i < C;
    }
    free(c);
    /* the Switch loss: f_i from the choices before any drop, P_i the mean probability */
    double aux = 0;
    for (int e = 0; e < E && T > 0; e++) {
        double f = 0, P = 0;
        for (int t = 0; t < T; t++) {
            for (int j = 0; j < k; j++) f += r->expert[t * k + j] == e;
            P += r->probs[(size_t)t * E + e];
        }
        aux += (f / ((double)T * k)) * (P / T);
    }
    r->aux = s->aux_alpha * E * aux;
}

void llm_moe_route_backward(const llm_moe_shape *s, const llm_moe_routing *r, const double *dgate, double daux,
                            double *dlogits) {
    int T = s->tokens, E = s->experts, k = s->top_k;
    double *f = calloc((size_t)E + 1, sizeof *f), *dp = malloc(((size_t)E + 1) * sizeof *dp);
    PL_CHECK(f && dp, "out of host memory");
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) f[r->expert[t * k + j]] += 1.0 / ((double)T * k);
    for (int t = 0; t < T; t++) {
        const double *p = r->probs + (size_t)t * E;
        /* aux = alpha E sum_i f_i (1/T) sum_t p[t,i]: d aux / d p[t,i] = alpha E f_i / T */
        for (int e = 0; e < E; e++) dp[e] = daux * s->aux_alpha * E * f[e] / T;
        /* g_j = p[e_j] / S: d g_j / d p[e_i] = (delta_ij - g_j) / S */
        double S = 0, dot = 0;
        for (int j = 0; j < k; j++) S += p[r->expert[t * k + j]], dot += dgate[t * k + j] * r->gate[t * k + j];
        for (int j = 0; j < k; j++) dp[r->expert[t * k + j]] += (dgate[t * k + j] - dot) / S;
        /* softmax: dl_e = p_e (dp_e - sum_m dp_m p_m) */
        double inner = 0;
        for (int e = 0; e < E; e++) inner += dp[e] * p[e];
        for (int e = 0; e < E; e++) dlogits[(size_t)t * E + e] = p[e] * (dp[e] - inner);
    }
    free(f);
    free(dp);
}

/* ---- experts -------------------------------------------------------------------------- */

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

void llm_moe_expert_forward(int m, int H, int F, const double *wg, const double *wu, const double *wd,
                            const double *x, double *y) {
    double *h = malloc(((size_t)F + 1) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    for (int i = 0; i < m; i++) {
        const double *xi = x + (size_t)i * H;
        for (int f = 0; f < F; f++) {
            double a = 0, b = 0;
            for (int c = 0; c < H; c++) a += wg[(size_t)f * H + c] * xi[c], b += wu[(size_t)f * H + c] * xi[c];
            h[f] = a * sigmoid(a) * b;
        }
        for (int c = 0; c < H; c++) {
            double acc = 0;
            for (int f = 0; f < F; f++) acc += wd[(size_t)c * F + f] * h[f];
            y[(size_t)i * H + c] = acc;
        }
    }
    free(h);
}

void llm_moe_expert_backward(int m, int H, int F, const double *wg, const double *wu, const double *wd,
                             const double *x, const double *dy, double *dx, double *dwg, double *dwu, double *dwd) {
    double *a = malloc(((size_t)F + 1) * 4 * sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    double *b = a + F, *h = b + F, *dh = h + F;
    for (int i = 0; i < m; i++) {
        const double *xi = x + (size_t)i * H, *dyi = dy + (size_t)i * H;
        for (int f = 0; f < F; f++) {
            a[f] = b[f] = 0;
            for (int c = 0; c < H; c++) a[f] += wg[(size_t)f * H + c] * xi[c], b[f] += wu[(size_t)f * H + c] * xi[c];
            h[f] = a[f] * sigmoid(a[f]) * b[f];
            dh[f] = 0;
            for (int c = 0; c < H; c++) dh[f] += wd[(size_t)c * F + f] * dyi[c];
        }
        for (int c = 0; c < H; c++)
            for (int f = 0; f < F; f++) dwd[(size_t)c * F + f] += dyi[c] * h[f];
        double *dxi = dx + (size_t)i * H;
        for (int c = 0; c < H; c++) dxi[c] = 0;
        for (int f = 0; f < F; f++) {
            double sg = sigmoid(a[f]);
            double da = dh[f] * b[f] * sg * (1.0 + a[f] * (1.0 - sg)); /* silu'(a) = s (1 + a (1 - s)) */
            double db = dh[f] * a[f] * sg;
            for (int c = 0; c < H; c++) {
                dwg[(size_t)f * H + c] += da * xi[c];
                dwu[(size_t)f * H + c] += db * xi[c];
                dxi[c] += da * wg[(size_t)f * H + c] + db * wu[(size_t)f * H + c];
            }
        }
    }
    free(a);
}

/* ---- the layer ------------------------------------------------------------------------ */

static void logits_of(const llm_moe_shape *s, const double *x, const double *wr, double *logits) {
    int T = s->tokens, E = s->experts, H = s->hidden;
    for (int t = 0; t < T; t++)
        for (int e = 0; e < E; e++) {
            double acc = 0;
            for (int c = 0; c < H; c++) acc += x[(size_t)t * H + c] * wr[(size_t)e * H + c];
            logits[(size_t)t * E + e] = acc;
        }
}

void llm_moe_forward(const llm_moe_shape *s, int G, const double *x, const double *wr, const double *wg,
                     const double *wu, const double *wd, double *y, llm_moe_routing *rt) {
    int T = s->tokens, E = s->experts, H = s->hidden, F = s->ffn, k = s->top_k;
    double *logits = malloc(((size_t)T * E + 1) * sizeof *logits), *out = malloc(((size_t)H + 1) * sizeof *out);
    PL_CHECK(logits && out, "out of host memory");
    for (int g = 0; g < G; g++) {
        const double *xg = x + (size_t)g * T * H;
        logits_of(s, xg, wr, logits);
        llm_moe_route(s, logits, &rt[g]);
        for (int t = 0; t < T; t++) {
            double *yt = y + ((size_t)g * T + t) * H;
            for (int c = 0; c < H; c++) yt[c] = 0;
            for (int j = 0; j < k; j++) {
                if (!rt[g].keep[t * k + j]) continue;
                int e = rt[g].expert[t * k + j];
                llm_moe_expert_forward(1, H, F, wg + (size_t)e * F * H, wu + (size_t)e * F * H, wd + (size_t)e * H * F,
                                       xg + (size_t)t * H, out);
                for (int c = 0; c < H; c++) yt[c] += rt[g].gate[t * k + j] * out[c];
            }
        }
    }
    free(logits);
    free(out);
}

void llm_moe_backward(const llm_moe_shape *s, int G, const double *x, const double *wr, const double *wg,
                      const double *wu, const double *wd, const llm_moe_routing *rt, const double *dy, double daux,
                      double *dx, double *dwr, double *dwg, double *dwu, double *dwd) {
    int T = s->tokens, E = s->experts, H = s->hidden, F = s->ffn, k = s->top_k;
    memset(dwg, 0, (size_t)E * F * H * sizeof *dwg);
    memset(dwu, 0, (size_t)E * F * H * sizeof *dwu);
    memset(dwd, 0, (size_t)E * H * F * sizeof *dwd);
    double *dgate = malloc(((size_t)T * k + 1) * sizeof *dgate), *dlogits = malloc(((size_t)T * E + 1) * sizeof *dlogits);
    double *out = malloc(((size_t)H + 1) * 3 * sizeof *out);
    PL_CHECK(dgate && dlogits && out, "out of host memory");
    double *dyg = out + H, *dxe = dyg + H;
    for (int g = 0; g < G; g++) {
        const double *xg = x + (size_t)g * T * H;
        for (int t = 0; t < T; t++) {
            const double *dyt = dy + ((size_t)g * T + t) * H;
            double *dxt = dx + ((size_t)g * T + t) * H;
            for (int c = 0; c < H; c++) dxt[c] = 0;
            for (int j = 0; j < k; j++) {
                dgate[t * k + j] = 0;
                if (!rt[g].keep[t * k + j]) continue;
                int e = rt[g].expert[t * k + j];
                const double *eg = wg + (size_t)e * F * H, *eu = wu + (size_t)e * F * H, *ed = wd + (size_t)e * H * F;
                llm_moe_expert_forward(1, H, F, eg, eu, ed, xg + (size_t)t * H, out);
                double gj = rt[g].gate[t * k + j], dot = 0;
                for (int c = 0; c < H; c++) dot += dyt[c] * out[c], dyg[c] = gj * dyt[c];
                dgate[t * k + j] = dot;
                llm_moe_expert_backward(1, H, F, eg, eu, ed, xg + (size_t)t * H, dyg, dxe, dwg + (size_t)e * F * H,
                                        dwu + (size_t)e * F * H, dwd + (size_t)e * H * F);
                for (int c = 0; c < H; c++) dxt[c] += dxe[c];
            }
        }
        llm_moe_route_backward(s, &rt[g], dgate, daux, dlogits);
        double *dwrg = dwr + (size_t)g * E * H;
        memset(dwrg, 0, (size_t)E * H * sizeof *dwrg);
        for (int t = 0; t < T; t++)
            for (int e = 0; e < E; e++) {
                double d = dlogits[(size_t)t * E + e];
                for (int c = 0; c < H; c++) {
                    dx[((size_t)g * T + t) * H + c] += d * wr[(size_t)e * H + c];
                    dwrg[(size_t)e * H + c] += d * xg[(size_t)t * H + c];
                }
            }
    }
    free(dgate);
    free(dlogits);
    free(out);
}
