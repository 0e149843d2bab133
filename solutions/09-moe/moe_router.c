/* moe_router.c - Lab 9: the router on the host: softmax, top-k, renormalised gates,
 * capacity and drops, the Switch load-balancing loss, and their backward.
 *
 * Pure host code: logits and every output are host arrays (moe.h gives the shapes); no
 * device call, no communication. moe_forward downloads the logits, calls moe_route and
 * uploads what the device needs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h" // defines: moe_config, moe_routing

/* ceil(T k / E cf), evaluated in exactly this order (the grader does the same). */
static int capacity(const moe_config *c) {
    return (int)ceil((double)c->tokens * c->top_k / c->experts * c->capacity_factor);
}

typedef struct {
    float p;
    int t, j;
} candidate;

/* Larger probability first; ties: lower token, then lower j. */
static int by_priority(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    int T = c->tokens, E = c->experts, k = c->top_k;
    for (int t = 0; t < T; t++) {
        const float *l = logits + (size_t)t * E;
        float *p = r->probs + (size_t)t * E, mx = l[0];
        for (int e = 1; e < E; e++) mx = fmaxf(mx, l[e]);
        double sum = 0; /* subtracting the max keeps expf finite; summing in double keeps it exact enough */
        for (int e = 0; e < E; e++) sum += p[e] = expf(l[e] - mx);
        for (int e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
        float chosen = 0;
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
    /* Capacity, expert by expert: the C most probable assignments stay. */
    int C = capacity(c);
    candidate *cand = malloc(((size_t)T * k + 1) * sizeof *cand);
    PL_CHECK(cand != NULL, "out of host memory");
    for (int e = 0; e < E; e++) {
        int m = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (r->expert[t * k + j] == e) cand[m++] = (candidate){r->probs[(size_t)t * E + e], t, j};
        qsort(cand, (size_t)m, sizeof *cand, by_priority);
        for (int i = 0; i < m; i++) r->keep[cand[i].t * k + cand[i].j] = i < C;
    }
    free(cand);
    /* The Switch loss: f_i counts the choices before any drop, normalised to sum to 1. */
    double aux = 0;
    for (int e = 0; e < E && T > 0; e++) {
        double f = 0, P = 0;
        for (int t = 0; t < T; t++) {
            for (int j = 0; j < k; j++) f += r->expert[t * k + j] == e;
            P += r->probs[(size_t)t * E + e];
        }
        aux += f / ((double)T * k) * (P / T);
    }
    r->aux = (float)(c->aux_alpha * E * aux);
}

void moe_route_backward(const moe_config *c, const moe_routing *r, const float *dgate, float daux, float *dlogits) {
    int T = c->tokens, E = c->experts, k = c->top_k;
    double *f = calloc((size_t)E + 1, sizeof *f), *dp = malloc(((size_t)E + 1) * sizeof *dp);
    PL_CHECK(f && dp, "out of host memory");
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) f[r->expert[t * k + j]] += 1.0 / ((double)T * k);
    for (int t = 0; t < T; t++) {
        const float *p = r->probs + (size_t)t * E;
        /* aux: d/dp[t,i] of alpha E sum_i f_i mean_t p[t,i] = alpha E f_i / T */
        for (int e = 0; e < E; e++) dp[e] = (double)daux * c->aux_alpha * E * f[e] / T;
        /* gates g_j = p[e_j] / S: dg_j/dp[e_i] = (delta_ij - g_j) / S */
        double S = 0, dot = 0;
        for (int j = 0; j < k; j++) S += p[r->expert[t * k + j]], dot += (double)dgate[t * k + j] * r->gate[t * k + j];
        for (int j = 0; j < k; j++) dp[r->expert[t * k + j]] += (dgate[t * k + j] - dot) / S;
        /* softmax: dl_e = p_e (dp_e - sum_m p_m dp_m) */
        double inner = 0;
        for (int e = 0; e < E; e++) inner += dp[e] * p[e];
        for (int e = 0; e < E; e++) dlogits[(size_t)t * E + e] = (float)(p[e] * (dp[e] - inner));
    }
    free(f);
    free(dp);
}
