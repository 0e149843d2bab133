/* lab09_inputs.c (referee) - Lab 9's inputs, as host arrays.
 *
 * Every input is a function of (rank, that rank's seed) or of the public seed, so that any
 * referee can rebuild every rank's inputs from the seeds (drv_case_seed: only referees know
 * them) and compute the float64 reference of the whole layer (models/internal/moe_ref.h);
 * a player receives its own rank's arrays and nothing else. Inputs are drawn so that no
 * routing decision is a near-tie: a token whose k-th and (k+1)-th probabilities (or whose
 * two choices) are closer than MARGIN, or an assignment that ties with the one across a
 * capacity boundary, is drawn again. A float32 layer and the float64 reference then agree on
 * every discrete choice, and the checks can demand it exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/moe_ref.h" // defines: llm_moe_* (the float64 layer)
#include "lab09_ref.h"

#define MARGIN 2e-4 /* probability gap around every routing decision (float32 error ~1e-7) */

enum { ID_X = 1, ID_WR, ID_WG, ID_WU, ID_WD, ID_DY, ID_LOGITS, ID_DGATE, ID_A2A, ID_AR, ID_COUNTS };

static float uni(uint64_t seed, uint64_t id, uint64_t i, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(pl_rng_bits(seed, id, i) >> 11) / 9007199254740992.0);
}

float l9_ar_input(uint64_t seed, size_t i) { return uni(seed, ID_AR, i, -1, 1); }

static void *alloc0(size_t n, size_t size) {
    void *p = calloc(n + 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

static llm_moe_shape shape_of(const l9_params *p) {
    return (llm_moe_shape){p->T, p->H, p->F, p->E, p->k, p->cf, p->alpha};
}

/* ======================================================================================= */
/* Routing margins                                                                         */
/* ======================================================================================= */

static void softmax_row(const double *l, double *p, int E) {
    double mx = l[0], sum = 0;
    for (int e = 1; e < E; e++) mx = fmax(mx, l[e]);
    for (int e = 0; e < E; e++) sum += p[e] = exp(l[e] - mx);
    for (int e = 0; e < E; e++) p[e] /= sum;
}

/* The top k+1 probabilities are apart by MARGIN (k < E); for k = E only the order matters.
 * ties: the k-th and (k+1)-th are equal on purpose (route.*.ties), and the (k+2)-th is
 * apart from them. */
static bool token_ok(const double *p, int E, int k, bool ties) {
    double best[5] = {-1, -1, -1, -1, -1};
    for (int e = 0; e < E; e++) {
        double v = p[e];
        for (int i = 0; i < 5; i++)
            if (v > best[i]) {
                double t = best[i];
                best[i] = v, v = t;
            }
    }
    int upto = k < E ? k : E - 1;
    if (ties) upto = k + 1 < E ? k + 1 : E - 1;
    for (int i = 0; i < upto; i++)
        if (best[i] - best[i + 1] < MARGIN && !(ties && i == k - 1)) return false;
    return true;
}

/* A token whose assignment sits at a capacity boundary too close to the next, or -1. */
static int capacity_clash(const llm_moe_shape *s, const llm_moe_routing *r) {
    int C = llm_moe_capacity(s), T = s->tokens, k = s->top_k;
    for (int e = 0; e < s->experts; e++) {
        double above = INFINITY, below = -INFINITY; /* the C-th largest and the (C+1)-th */
        int m = 0, t_below = -1;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++) m += r->expert[t * k + j] == e;
        if (m <= C) continue;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++) {
                if (r->expert[t * k + j] != e) continue;
                double v = r->probs[(size_t)t * s->experts + e];
                if (r->keep[t * k + j] && v < above) above = v;
                if (!r->keep[t * k + j] && v > below) below = v, t_below = t;
            }
        if (above - below < MARGIN) return t_below;
    }
    return -1;
}

/* logits [T, E] of one group from a row generator, redrawn until every decision has its
 * margin; row(t, attempt, out) writes token t's logits for that attempt. */
typedef void (*row_fn)(void *ctx, int t, int attempt, double *logits_row);

static void draw_token(const llm_moe_shape *s, row_fn row, void *ctx, bool ties, int t, int *attempt, double *l,
                       double *pr) {
    int E = s->experts;
    do {
        row(ctx, t, attempt[t]++, l + (size_t)t * E);
        softmax_row(l + (size_t)t * E, pr, E);
    } while (!token_ok(pr, E, s->top_k, ties) && attempt[t] < 20000);
}

static void draw_routable(const llm_moe_shape *s, row_fn row, void *ctx, bool ties) {
    int T = s->tokens, E = s->experts;
    int *attempt = alloc0((size_t)T, sizeof *attempt);
    double *l = alloc0((size_t)T * E, sizeof *l), *pr = alloc0((size_t)E, sizeof *pr);
    for (int t = 0; t < T; t++) draw_token(s, row, ctx, ties, t, attempt, l, pr);
    llm_moe_routing r;
    llm_moe_routing_alloc(&r, s);
    for (int round = 0; round < 20000; round++) {
        llm_moe_route(s, l, &r);
        int t = capacity_clash(s, &r);
        if (t < 0) break;
        draw_token(s, row, ctx, ties, t, attempt, l, pr);
    }
    llm_moe_routing_free(&r);
    free(attempt);
    free(l);
    free(pr);
}

/* ======================================================================================= */
/* Inputs                                                                                  */
/* ======================================================================================= */

/* Route cases: logits drawn directly, skewed ones leaning on expert 0. */
typedef struct {
    const l9_params *p;
    uint64_t seed;
    float *logits;
} route_ctx;
static void route_row(void *v, int t, int attempt, double *out) {
    route_ctx *c = v;
    int E = c->p->E;
    for (int e = 0; e < E; e++) {
        float x = uni(c->seed, ID_LOGITS + ((uint64_t)attempt << 8), (uint64_t)t * E + e, -2, 2);
        if (c->p->variant == V_SKEW && e == 0) x += 5;
        c->logits[(size_t)t * E + e] = x;
        out[e] = x;
    }
    if (c->p->variant == V_TIES && c->p->k < E) { /* the (k+1)-th largest logit made equal to the k-th */
        int k = c->p->k, order[64];
        for (int e = 0; e < E; e++) order[e] = e;
        for (int i = 0; i <= k; i++)
            for (int j = i + 1; j < E; j++)
                if (out[order[j]] > out[order[i]]) {
                    int tmp = order[i];
                    order[i] = order[j], order[j] = tmp;
                }
        out[order[k]] = out[order[k - 1]];
        c->logits[(size_t)t * E + order[k]] = c->logits[(size_t)t * E + order[k - 1]];
    }
}

/* Layer cases: token t of one call, and its logits against the router. */
typedef struct {
    const l9_params *p;
    uint64_t seed;
    int call;
    const float *wr;
    float *x;
} token_ctx;
static void token_row(void *v, int t, int attempt, double *out) {
    token_ctx *c = v;
    int H = c->p->H, E = c->p->E;
    float *xt = c->x + (size_t)t * H;
    uint64_t id = ID_X + ((uint64_t)c->call << 8) + ((uint64_t)attempt << 24);
    for (int h = 0; h < H; h++) xt[h] = uni(c->seed, id, (uint64_t)t * H + h, -1, 1);
    if (c->p->variant == V_SKEW) xt[0] = 1.0f; /* the feature the skewed router keys on */
    for (int e = 0; e < E; e++) {
        double acc = 0;
        for (int h = 0; h < H; h++) acc += (double)xt[h] * c->wr[(size_t)e * H + h];
        out[e] = acc;
    }
}

static int a2a_count(const l9_params *p, uint64_t pub, int from, int to) {
    switch (p->variant) {
    case A2A_EMPTY: return 0;
    case A2A_SKEW: return to == 0 ? 37 : 0;
    /* zeros only where the rule puts them: a pairwise exchange that deadlocks, deadlocks on
     * every run (a random zero could break its cycle) */
    default: return (from + 2 * to) % 5 == 1 ? 0 : 1 + (int)(pl_rng_bits(pub, ID_COUNTS, (uint64_t)from * 4096 + to) % 40);
    }
}

void l9_inputs_make(const l9_params *p, int rank, uint64_t seed, uint64_t pub, l9_inputs *in) {
    memset(in, 0, sizeof *in);
    int n = p->n, T = p->T, H = p->H, F = p->F, E = p->E, k = p->k;
    in->cfg = (l9_cfg){T, H, F, E, k, (float)p->cf, (float)p->alpha, 0};
    switch (p->kind) {
    case K_CONFIG: {
        static const int codes[CFG_COUNT] = {L9_OK, L9_ERR_SHAPE, L9_ERR_TOPK, L9_ERR_TOPK, L9_ERR_CAPACITY,
                                             L9_ERR_CAPACITY, L9_ERR_EXPERTS, L9_ERR_MISMATCH, L9_ERR_SHAPE,
                                             L9_ERR_TOPK,     L9_ERR_CAPACITY, L9_ERR_MISMATCH};
        if ((p->variant == CFG_MISMATCH || p->variant == CFG_MISMATCH_SHAPE) && rank == 0) in->cfg.hidden += 8;
        in->expect_code = codes[p->variant];
        return;
    }
    case K_ROUTE: {
        llm_moe_shape s = shape_of(p);
        in->logits = alloc0((size_t)T * E, sizeof(float));
        route_ctx rc = {p, seed, in->logits};
        draw_routable(&s, route_row, &rc, p->variant == V_TIES);
        /* dgate: 0 on dropped assignments, as moe_forward's backward would give */
        double *l = alloc0((size_t)T * E, sizeof *l);
        for (size_t i = 0; i < (size_t)T * E; i++) l[i] = in->logits[i];
        llm_moe_routing r;
        llm_moe_routing_alloc(&r, &s);
        llm_moe_route(&s, l, &r);
        in->dgate = alloc0((size_t)T * k, sizeof(float));
        for (int a = 0; a < T * k; a++) in->dgate[a] = r.keep[a] ? uni(seed, ID_DGATE, (uint64_t)a, -1, 1) : 0.0f;
        in->daux = uni(seed, ID_DGATE, 1u << 30, 0.5f, 2.0f);
        llm_moe_routing_free(&r);
        free(l);
        return;
    }
    case K_A2A: {
        in->send_counts = alloc0((size_t)n, sizeof(int));
        in->recv_counts = alloc0((size_t)n, sizeof(int));
        for (int q = 0; q < n; q++) {
            in->send_counts[q] = a2a_count(p, pub, rank, q);
            in->recv_counts[q] = a2a_count(p, pub, q, rank);
            in->send_total += (size_t)in->send_counts[q];
            in->recv_total += (size_t)in->recv_counts[q];
        }
        in->a2a_send = alloc0(in->send_total, sizeof(float));
        for (size_t i = 0; i < in->send_total; i++) in->a2a_send[i] = (float)((int)(pl_rng_bits(seed, ID_A2A, i) % 2047) - 1023);
        return;
    }
    case K_AR: {
        size_t nin = (size_t)p->calls * (size_t)p->count;
        in->ar_in = alloc0(nin, sizeof(float));
        for (size_t i = 0; i < nin; i++) in->ar_in[i] = uni(seed, ID_AR, i, -1, 1);
        return;
    }
    case K_LAYER:
    case K_REUSE:
        break;
    }
    int Le = E / n;
    llm_moe_shape s = shape_of(p);
    in->wr = alloc0((size_t)E * H, sizeof(float));
    float wb = 2.0f / sqrtf((float)H);
    for (size_t i = 0; i < (size_t)E * H; i++) in->wr[i] = uni(pub, ID_WR, i, -wb, wb);
    if (p->variant == V_SKEW)
        for (int e = 0; e < E; e++) in->wr[(size_t)e * H] = e == 0 ? 6.0f : -1.0f;
    in->wg = alloc0((size_t)Le * F * H, sizeof(float));
    in->wu = alloc0((size_t)Le * F * H, sizeof(float));
    in->wd = alloc0((size_t)Le * H * F, sizeof(float));
    float gb = 1.0f / sqrtf((float)H), db = 1.0f / sqrtf((float)F);
    for (size_t i = 0; i < (size_t)Le * F * H; i++) {
        in->wg[i] = uni(seed, ID_WG, i, -gb, gb);
        in->wu[i] = uni(seed, ID_WU, i, -gb, gb);
        in->wd[i] = uni(seed, ID_WD, i, -db, db);
    }
    in->x = alloc0((size_t)p->calls * T * H, sizeof(float));
    for (int call = 0; call < p->calls; call++) {
        token_ctx tc = {p, seed, call, in->wr, in->x + (size_t)call * T * H};
        draw_routable(&s, token_row, &tc, false);
    }
    in->dy = alloc0((size_t)T * H, sizeof(float));
    for (size_t i = 0; i < (size_t)T * H; i++) in->dy[i] = uni(seed, ID_DY, i, -1, 1);
    in->daux = 1.5f;
}

void l9_inputs_free(l9_inputs *in) {
    void *ptrs[] = {in->x, in->wr, in->wg, in->wu, in->wd, in->dy, in->logits, in->dgate, in->send_counts,
                    in->recv_counts, in->a2a_send, in->ar_in};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    memset(in, 0, sizeof *in);
}
