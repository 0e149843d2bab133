/* lab10.c (referee) - Lab 10's cases on the referee's side: every token's q, k and v from
 * the case's seed (only referees know it), this rank's tokens into its slots, the float64
 * attention of the whole sequence for its tokens, and the checks: outputs, the traffic of
 * the ring and of Ulysses (exact), the ring's work by its kernel's count and its memory.
 *
 * The layout (which tokens a rank holds) is the referee's own, from context.h's rule: the
 * player is given its tokens in that order, and cp_positions is checked against it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_block_* (the block cases' serial reference)
#include "lab10.h"

#define Q_AMPLITUDE 2.0 /* queries in [-2, 2], keys and values in [-1, 1]: peaked softmaxes */

typedef struct {
    l10_params p;
    uint64_t seed;
    int *rows, *pos;   /* every rank's token count, and this rank's positions             */
    int maxrows;
    l10_cfg cfg[1];    /* this rank's */
    int expect_code;
    double *o_ref, *lse_ref; /* this rank's [Sl, H, d], [Sl, H]; merge: [R, d], [R]       */
    double *y_ref, *dx_ref, *g_ref; /* block: this rank's rows of y and dx; every gradient    */
    size_t count;            /* block: the parameters' floats                              */
} lab10_case;

/* ---- inputs --------------------------------------------------------------------------- */

/* A value in [-1, 1) for (tensor, token, head, i): a function of the case's seed alone. */
static double value(uint64_t seed, int tensor, int t, int h, int i) {
    uint64_t idx = (((uint64_t)t * 4096u + (uint64_t)h) * 4096u + (uint64_t)i);
    return 2.0 * (double)(pl_rng_bits(seed, 0x100 + (uint64_t)tensor, idx) >> 11) / 9007199254740992.0 - 1.0;
}

static int chunks_of(int layout, int n) { return layout == L10_ZIGZAG ? 2 * n : n; }

/* rank r's positions under the layout; returns the count */
static int positions(int S, int n, int layout, int r, int *pos) {
    int C = chunks_of(layout, n), ch[2] = {r, 2 * n - 1 - r}, m = layout == L10_ZIGZAG ? 2 : 1, k = 0;
    for (int i = 0; i < m; i++)
        for (int t = 0; t < l10_chunk_len(S, C, ch[i]); t++)
            if (pos) pos[k++] = l10_chunk_start(S, C, ch[i]) + t;
            else k++;
    return k;
}

/* The float64 attention of this rank's tokens over the whole sequence. */
static void reference(const l10_params *p, uint64_t seed, const int *pos, int rows, double *o, double *lse) {
    int group = p->H / p->Hkv, d = p->d;
    double scale = 1.0 / sqrt((double)d), *sc = malloc(((size_t)p->S + 1) * sizeof *sc);
    PL_CHECK(sc != NULL, "out of host memory");
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < p->H; h++) {
            int kh = h / group, last = p->causal ? pos[i] : p->S - 1;
            double m = -INFINITY, sum = 0;
            for (int j = 0; j <= last; j++) {
                double dot = 0;
                for (int x = 0; x < d; x++)
                    dot += Q_AMPLITUDE * value(seed, 0, pos[i], h, x) * value(seed, 1, j, kh, x);
                sc[j] = scale * dot;
                if (sc[j] > m) m = sc[j];
            }
            double *oi = o + ((size_t)i * p->H + h) * d;
            for (int x = 0; x < d; x++) oi[x] = 0;
            for (int j = 0; j <= last; j++) {
                double w = exp(sc[j] - m);
                sum += w;
                for (int x = 0; x < d; x++) oi[x] += w * value(seed, 2, j, kh, x);
            }
            for (int x = 0; x < d; x++) oi[x] /= sum;
            if (lse) lse[(size_t)i * p->H + h] = m + log(sum);
        }
    free(sc);
}

/* ---- merge inputs ------------------------------------------------------------------------ */

/* Row r's two log-sum-exps of variant v (-INFINITY: that side saw no key). */
static void merge_lses(int v, uint64_t seed, int r, double *a, double *b) {
    double u = value(seed, 5, r, 0, 0), w = value(seed, 5, r, 0, 1);
    *a = 3 * u, *b = 3 * w;
    if (v == M_LARGE) *a = 200 + 50 * u, *b = 200 + 50 * w;
    if (v == M_EMPTY_RUNNING) *a = -INFINITY;
    if (v == M_EMPTY_BLOCK) *b = -INFINITY;
    if (v == M_MIXED) {
        int k = r % 5;
        if (k == 1) *a = -INFINITY;
        if (k == 2) *b = -INFINITY;
        if (k == 3) *a = -INFINITY, *b = -INFINITY;
        if (k == 4) *a = 150 + 40 * u, *b = *a - 30 * fabs(w);
    }
}

static void setup_merge(drv_case *c, lab10_case *k) {
    const l10_params *p = &k->p;
    int R = p->rows, d = p->d;
    float *o = drv_slot_new(c, "o", (size_t)R * d * sizeof(float), DRV_INOUT);
    float *lse = drv_slot_new(c, "lse", (size_t)R * sizeof(float), DRV_INOUT);
    float *ob = drv_slot_new(c, "ob", (size_t)R * d * sizeof(float), DRV_IN | DRV_CONST);
    float *lb = drv_slot_new(c, "lb", (size_t)R * sizeof(float), DRV_IN | DRV_CONST);
    k->o_ref = malloc(((size_t)R * d + 1) * sizeof(double));
    k->lse_ref = malloc(((size_t)R + 1) * sizeof(double));
    PL_CHECK(k->o_ref && k->lse_ref, "out of host memory");
    uint64_t seed = k->seed ^ (uint64_t)c->rank * 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < R; r++) {
        double a, b;
        merge_lses(p->variant, seed, r, &a, &b);
        lse[r] = (float)a, lb[r] = (float)b;
        a = lse[r], b = lb[r]; /* the reference merges what the player gets */
        double m = fmax(a, b), wa = a == -INFINITY ? 0 : exp(a - m), wb = b == -INFINITY ? 0 : exp(b - m);
        for (int x = 0; x < d; x++) {
            size_t i = (size_t)r * d + x;
            o[i] = a == -INFINITY ? 0.0f : (float)value(seed, 3, r, 0, x);
            ob[i] = b == -INFINITY ? 0.0f : (float)value(seed, 4, r, 0, x);
            k->o_ref[i] = m == -INFINITY ? o[i] : (wa * o[i] + wb * ob[i]) / (wa + wb);
        }
        k->lse_ref[r] = m == -INFINITY ? -INFINITY : m + log(wa + wb);
    }
}

/* ---- the block ------------------------------------------------------------------------- */

/* The GPT block's parameters (the counter RNG of gpt.h from the case's seed), and x and dy
 * of every token; the serial host block runs over the whole sequence, and this rank keeps
 * its rows of y and dx and every parameter gradient. */
static void setup_block(drv_case *c, lab10_case *k, int rows) {
    gpt_config g = l10_block_config(&k->p);
    size_t C = (size_t)g.hidden, SC = (size_t)g.seq * C;
    gpt_block_params P, G;
    gpt_host_block_alloc(&P, &g), gpt_host_block_init(&P, &g, 0, k->seed);
    gpt_host_block_alloc(&G, &g);
    k->count = P.count;
    memcpy(drv_slot_new(c, "w", P.count * sizeof(float), DRV_IN | DRV_CONST), P.base, P.count * sizeof(float));
    float *x = malloc(SC * sizeof *x), *dy = malloc(SC * sizeof *dy), *y = malloc(SC * sizeof *y),
          *dx = malloc(SC * sizeof *dx);
    PL_CHECK(x && dy && y && dx, "out of host memory");
    for (int t = 0; t < g.seq; t++)
        for (size_t i = 0; i < C; i++) {
            x[t * C + i] = (float)value(k->seed, 7, t, 0, (int)i);
            dy[t * C + i] = (float)(0.1 * value(k->seed, 8, t, 0, (int)i));
        }
    gpt_host_acts ha;
    gpt_host_acts_alloc(&ha, &g);
    gpt_host_block_forward(&g, &P, &ha, y, x);
    gpt_host_block_backward(&g, &P, &G, &ha, dx, dy);
    float *xs = drv_slot_new(c, "x", (size_t)rows * C * sizeof(float), DRV_IN | DRV_CONST);
    float *dys = drv_slot_new(c, "dy", (size_t)rows * C * sizeof(float), DRV_IN | DRV_CONST);
    k->y_ref = malloc(((size_t)rows * C + 1) * sizeof(double));
    k->dx_ref = malloc(((size_t)rows * C + 1) * sizeof(double));
    k->g_ref = malloc((P.count + 1) * sizeof(double));
    PL_CHECK(k->y_ref && k->dx_ref && k->g_ref, "out of host memory");
    for (int i = 0; i < rows; i++)
        for (size_t j = 0; j < C; j++) {
            size_t at = (size_t)k->pos[i] * C + j, mine = (size_t)i * C + j;
            xs[mine] = x[at], dys[mine] = dy[at], k->y_ref[mine] = y[at], k->dx_ref[mine] = dx[at];
        }
    for (size_t i = 0; i < P.count; i++) k->g_ref[i] = G.base[i];
    drv_slot_new(c, "y", (size_t)rows * C * sizeof(float), DRV_OUT);
    drv_slot_new(c, "dx", (size_t)rows * C * sizeof(float), DRV_OUT);
    drv_slot_new(c, "g", P.count * sizeof(float), DRV_OUT | DRV_ZEROED);
    gpt_host_acts_free(&ha);
    gpt_host_params_free(P.base), gpt_host_params_free(G.base);
    free(x), free(dy), free(y), free(dx);
}

static void check_block(drv_case *c, lab10_case *k) {
    const l10_params *p = &k->p;
    int rows = k->rows[c->rank], n = c->world;
    size_t RC = (size_t)rows * p->H * p->d;
    char what[128];
    const char *attn = p->u == 1 ? "cp_ring_forward/backward" : p->u == n ? "cp_ulysses_forward/backward" : "cp_usp_forward/backward";
    snprintf(what, sizeof what, "the GPT block through %s: y (this rank's rows)", attn);
    drv_check_tensor(c, what, drv_slot_host(c, "y"), k->y_ref, RC, drv_tolerance());
    snprintf(what, sizeof what, "the GPT block through %s: dx (this rank's rows)", attn);
    drv_check_tensor(c, what, drv_slot_host(c, "dx"), k->dx_ref, RC, drv_tolerance());
    snprintf(what, sizeof what, "the GPT block through %s: the parameter gradients (the whole sequence's)", attn);
    drv_check_tensor(c, what, drv_slot_host(c, "g"), k->g_ref, k->count, drv_tolerance());
}

/* ---- setup --------------------------------------------------------------------------- */

static int expected_code(const l10_params *p, const l10_cfg *all, int n) {
    for (int r = 1; r < n; r++)
        if (memcmp(&all[r], &all[0], sizeof all[0]) != 0) return L10_ERR_MISMATCH;
    const l10_cfg *f = &all[0];
    if (f->seq < 1 || f->heads < 1 || f->kv_heads < 1 || f->head_dim < 1 || f->heads % f->kv_heads != 0 ||
        (f->causal != 0 && f->causal != 1) || (f->layout != L10_CONTIGUOUS && f->layout != L10_ZIGZAG) ||
        f->seq < chunks_of(f->layout, n))
        return L10_ERR_SHAPE;
    if (p->ulysses && (f->heads % n != 0 || f->kv_heads % n != 0)) return L10_ERR_HEADS;
    return L10_OK;
}

static l10_cfg cfg_of(const l10_params *p, int rank) {
    l10_cfg f = {p->S, p->H, p->Hkv, p->d, p->causal, p->layout, p->ulysses, 0};
    if (p->kind == K_CONFIG && rank == 0) {
        if (p->variant == CFG_MISMATCH) f.seq++;
        if (p->variant == CFG_MISMATCH_SHAPE) f.head_dim = 0;
    }
    return f;
}

void lab10_setup(drv_case *c) {
    lab10_case *k = drv_state(c, sizeof *k);
    l10_params *p = &k->p;
    l10_params_of(c, p);
    int n = c->world;
    k->seed = drv_case_seed(c, -1, 0);
    k->cfg[0] = cfg_of(p, c->rank);
    memcpy(drv_slot_new(c, "cfg", sizeof(l10_cfg), DRV_IN | DRV_CONST), &k->cfg[0], sizeof(l10_cfg));
    drv_slot_new(c, "counted", L10_CNT_LEN * sizeof(double), DRV_OUT | DRV_ZEROED);
    switch (p->kind) {
    case K_MERGE: setup_merge(c, k); return;
    case K_CONFIG: {
        l10_cfg *all = malloc((size_t)n * sizeof *all);
        PL_CHECK(all != NULL, "out of host memory");
        for (int r = 0; r < n; r++) all[r] = cfg_of(p, r);
        k->expect_code = expected_code(p, all, n);
        free(all);
        drv_slot_new(c, "code", sizeof(int32_t), DRV_OUT);
        return;
    }
    default: break;
    }
    k->rows = malloc((size_t)n * sizeof(int));
    k->pos = malloc(((size_t)l10_pos_cap(p->S, n) + 1) * sizeof(int));
    PL_CHECK(k->rows && k->pos, "out of host memory");
    for (int r = 0; r < n; r++) {
        k->rows[r] = positions(p->S, n, p->layout, r, NULL);
        if (k->rows[r] > k->maxrows) k->maxrows = k->rows[r];
    }
    int rows = positions(p->S, n, p->layout, c->rank, k->pos);
    if (p->kind == K_POS) {
        drv_slot_new(c, "pos", (size_t)l10_pos_cap(p->S, n) * sizeof(int32_t), DRV_OUT);
        drv_slot_new(c, "count", sizeof(int32_t), DRV_OUT);
        return;
    }
    if (p->kind == K_BLOCK) {
        setup_block(c, k, rows);
        return;
    }
    size_t nq = (size_t)rows * p->H * p->d, nk = (size_t)rows * p->Hkv * p->d;
    float *q = drv_slot_new(c, "q", nq * sizeof(float), DRV_IN | DRV_CONST);
    float *kk = drv_slot_new(c, "k", nk * sizeof(float), DRV_IN | DRV_CONST);
    float *v = drv_slot_new(c, "v", nk * sizeof(float), DRV_IN | DRV_CONST);
    for (int i = 0; i < rows; i++) {
        for (int h = 0; h < p->H; h++)
            for (int x = 0; x < p->d; x++)
                q[((size_t)i * p->H + h) * p->d + x] = (float)(Q_AMPLITUDE * value(k->seed, 0, k->pos[i], h, x));
        for (int h = 0; h < p->Hkv; h++)
            for (int x = 0; x < p->d; x++) {
                size_t at = ((size_t)i * p->Hkv + h) * p->d + x;
                kk[at] = (float)value(k->seed, 1, k->pos[i], h, x);
                v[at] = (float)value(k->seed, 2, k->pos[i], h, x);
            }
    }
    if (p->kind == K_ULY_BWD || p->kind == K_USP_BWD) {
        float *g = drv_slot_new(c, "dout", nq * sizeof(float), DRV_IN | DRV_CONST);
        for (int i = 0; i < rows; i++)
            for (int h = 0; h < p->H; h++)
                for (int x = 0; x < p->d; x++) g[((size_t)i * p->H + h) * p->d + x] = (float)value(k->seed, 6, k->pos[i], h, x);
        drv_slot_new(c, "dq", nq * sizeof(float), DRV_OUT);
        drv_slot_new(c, "dk", nk * sizeof(float), DRV_OUT);
        drv_slot_new(c, "dv", nk * sizeof(float), DRV_OUT);
        return;
    }
    if (p->kind == K_RING_BWD) { /* the forward's o and lse (float64, rounded), and dout */
        size_t nl = (size_t)rows * p->H;
        double *o64 = malloc((nq + 1) * sizeof *o64), *l64 = malloc((nl + 1) * sizeof *l64);
        PL_CHECK(o64 && l64, "out of host memory");
        reference(p, k->seed, k->pos, rows, o64, l64);
        float *o = drv_slot_new(c, "o", nq * sizeof(float), DRV_IN | DRV_CONST);
        float *lse = drv_slot_new(c, "lse", nl * sizeof(float), DRV_IN | DRV_CONST);
        float *g = drv_slot_new(c, "dout", nq * sizeof(float), DRV_IN | DRV_CONST);
        for (size_t i = 0; i < nq; i++) o[i] = (float)o64[i];
        for (size_t i = 0; i < nl; i++) lse[i] = (float)l64[i];
        for (int i = 0; i < rows; i++)
            for (int h = 0; h < p->H; h++)
                for (int x = 0; x < p->d; x++) g[((size_t)i * p->H + h) * p->d + x] = (float)value(k->seed, 6, k->pos[i], h, x);
        free(o64);
        free(l64);
        drv_slot_new(c, "dq", nq * sizeof(float), DRV_OUT);
        drv_slot_new(c, "dk", nk * sizeof(float), DRV_OUT);
        drv_slot_new(c, "dv", nk * sizeof(float), DRV_OUT);
        return;
    }
    drv_slot_new(c, "o", nq * sizeof(float), DRV_OUT);
    if (p->kind == K_RING) drv_slot_new(c, "lse", (size_t)rows * p->H * sizeof(float), DRV_OUT);
}

/* The float64 gradients of loss = sum(o * dout) over the whole sequence: dq of this rank's
 * queries, dk and dv of its keys (every query of the sequence that sees them). */
static void reference_backward(const l10_params *p, uint64_t seed, const int *pos, int rows, double *dq, double *dk,
                               double *dv) {
    int S = p->S, H = p->H, Hkv = p->Hkv, d = p->d, group = H / Hkv;
    double scale = 1.0 / sqrt((double)d);
    int *all = calloc((size_t)S + 1, sizeof *all);
    double *o = malloc(((size_t)S * H * d + 1) * sizeof *o), *lse = malloc(((size_t)S * H + 1) * sizeof *lse);
    PL_CHECK(all && o && lse, "out of host memory");
    for (int i = 0; i < S; i++) all[i] = i;
    reference(p, seed, all, S, o, lse); /* every query's (o, lse) */
    memset(dq, 0, (size_t)rows * H * d * sizeof *dq);
    memset(dk, 0, (size_t)rows * Hkv * d * sizeof *dk);
    memset(dv, 0, (size_t)rows * Hkv * d * sizeof *dv);
    /* one (query position i, head h, key position j) term: P, and dS = P (dP - D) scale */
    for (int i = 0; i < S; i++)
        for (int h = 0; h < H; h++) {
            int kh = h / group;
            double D = 0;
            for (int x = 0; x < d; x++) D += value(seed, 6, i, h, x) * o[((size_t)i * H + h) * d + x];
            int mine_q = -1;
            for (int r = 0; r < rows; r++)
                if (pos[r] == i) mine_q = r;
            for (int r = -1; r < rows; r++) { /* r = -1: this rank's query i against every key; else key pos[r] */
                int j0 = r < 0 ? 0 : pos[r], j1 = r < 0 ? S - 1 : pos[r];
                if (r < 0 && mine_q < 0) continue;
                for (int j = j0; j <= j1; j++) {
                    if (p->causal && j > i) continue;
                    double dot = 0, dp = 0;
                    for (int x = 0; x < d; x++) {
                        dot += Q_AMPLITUDE * value(seed, 0, i, h, x) * value(seed, 1, j, kh, x);
                        dp += value(seed, 6, i, h, x) * value(seed, 2, j, kh, x);
                    }
                    double P = exp(scale * dot - lse[(size_t)i * H + h]), ds = P * (dp - D) * scale;
                    for (int x = 0; x < d; x++) {
                        if (r < 0) dq[((size_t)mine_q * H + h) * d + x] += ds * value(seed, 1, j, kh, x);
                        else {
                            dk[((size_t)r * Hkv + kh) * d + x] += ds * Q_AMPLITUDE * value(seed, 0, i, h, x);
                            dv[((size_t)r * Hkv + kh) * d + x] += P * value(seed, 6, i, h, x);
                        }
                    }
                }
            }
        }
    free(all);
    free(o);
    free(lse);
}

/* ---- checks ------------------------------------------------------------------------------- */

/* o and lse against the reference; lse entries that must be -inf must be exactly that. */
static void check_o_lse(drv_case *c, const float *o, const double *o_ref, size_t no, const float *lse,
                        const double *lse_ref, size_t nl, const char *what) {
    char name[96];
    size_t bad = 0, first = 0, nfin = 0;
    for (size_t i = 0; i < nl; i++) {
        bool want_inf = lse_ref[i] == -INFINITY, got_inf = lse[i] == -INFINITY;
        if (want_inf != got_inf && bad++ == 0) first = i;
        nfin += !want_inf;
    }
    if (!drv_check_all(c, bad == 0, "%s: %zu log-sum-exp(s) are -inf where the other is not (first here [%zu]: got %g, expected %g)",
                       what, bad, first, bad ? (double)lse[first] : 0.0, bad ? lse_ref[first] : 0.0))
        return;
    snprintf(name, sizeof name, "%s: o", what);
    drv_check_tensor(c, name, o, o_ref, no, drv_tolerance());
    float *gl = malloc((nfin + 1) * sizeof *gl);
    double *wl = malloc((nfin + 1) * sizeof *wl);
    PL_CHECK(gl && wl, "out of host memory");
    size_t j = 0;
    for (size_t i = 0; i < nl; i++)
        if (lse_ref[i] != -INFINITY) gl[j] = lse[i], wl[j++] = lse_ref[i];
    snprintf(name, sizeof name, "%s: lse", what);
    drv_check_tensor(c, name, gl, wl, nfin, drv_tolerance());
    free(gl);
    free(wl);
}

/* The (query, key) pairs this rank must compute at least (every unmasked pair) and may
 * compute at most (the chunk pairs with an unmasked pair, its own block whole). */
static void work_bounds(const lab10_case *k, int rank, double *need, double *allow) {
    const l10_params *p = &k->p;
    int n = p->n, C = chunks_of(p->layout, n), m = p->layout == L10_ZIGZAG ? 2 : 1;
    *need = 0, *allow = 0;
    int mine[2] = {rank, 2 * n - 1 - rank};
    for (int a = 0; a < m; a++) {
        int qs = l10_chunk_start(p->S, C, mine[a]), ql = l10_chunk_len(p->S, C, mine[a]);
        for (int t = 0; t < ql; t++) *need += p->causal ? qs + t + 1 : p->S;
        for (int r = 0; r < n; r++) {
            int theirs[2] = {r, 2 * n - 1 - r};
            for (int b = 0; b < m; b++) {
                int ks = l10_chunk_start(p->S, C, theirs[b]), kl = l10_chunk_len(p->S, C, theirs[b]);
                bool needed = !p->causal || ks <= qs + ql - 1;
                if (needed || r == rank) *allow += (double)ql * kl;
            }
        }
    }
    *need *= p->H, *allow *= p->H;
}

static void check_ring_work(drv_case *c, lab10_case *k, const double *counted) {
    bool bwd = k->p.kind == K_RING_BWD;
    const char *kern = bwd ? "kern_flash_block_backward" : "kern_flash_block";
    double need, allow, got = counted[bwd ? L10_CNT_BWD_PAIRS : L10_CNT_PAIRS];
    work_bounds(k, c->rank, &need, &allow);
    double worst = drv_max(got), total = drv_sum(got);
    drv_num(c, "work_pairs", got);
    drv_num(c, "work_imbalance", total > 0 ? worst / (total / c->world) : 0);
    if (got < need)
        drv_fail(c, "%s computed %.0f (query, key) pairs on rank %d (the player's trace), fewer than the %.0f its "
                 "queries attend to: every pair goes through %s", kern, got, c->rank, need, kern);
    else if (got > allow)
        drv_fail(c, "%s computed %.0f (query, key) pairs on rank %d (the player's trace); %s ring attention allows "
                 "%.0f (chunk pairs with an unmasked pair, its own block whole)%s", kern, got, c->rank,
                 k->p.causal ? "causal" : "full", allow,
                 k->p.causal ? ": a block above the causal diagonal was computed" : "");
}

/* Forward: two key/value blocks (the one computed on and the one arriving), one block's
 * output and log-sum-exp, every rank's positions: what the ring needs beside its inputs
 * and outputs. Backward: two key/value blocks and two of their gradients, the positions. */
static double ring_memory_bound(const lab10_case *k, int rows) {
    const l10_params *p = &k->p;
    if (p->kind == K_RING_BWD) return 4.0 * (8.0 * k->maxrows * p->Hkv * p->d + 2.0 * (p->S + 2 * p->n + 2)) + 256;
    return 4.0 * (4.0 * k->maxrows * p->Hkv * p->d + (double)rows * p->H * (p->d + 1) + 2.0 * (p->S + 2 * p->n + 2)) +
           256;
}

/* What the ring's forward and backward share: work, order, memory. */
static void check_ring_costs(drv_case *c, lab10_case *k, const double *counted, int rows, const char *fn) {
    check_ring_work(c, k, counted);
    double early = counted[L10_CNT_EARLY];
    drv_check_all(c, c->world == 1 || early == 0,
                  "overlap: the block kernel ran %.0f time(s) on rank %d before the first receive was posted (the "
                  "player's trace): post the next block's exchange before computing the current one", early, c->rank);
    double extra = (double)(c->mem_peak - c->mem_before), bound = ring_memory_bound(k, rows);
    drv_num(c, "extra_bytes", extra);
    drv_check_all(c, extra <= bound,
                  "%s allocated %.0f bytes at its peak on rank %d (the player's count); two key/value blocks%s and the "
                  "positions need %.0f: the sequence's keys were gathered?", fn, extra, c->rank,
                  k->p.kind == K_RING_BWD ? ", two of their gradients" : ", one block's output", bound);
}

void lab10_check(drv_case *c) {
    lab10_case *k = c->state;
    const l10_params *p = &k->p;
    const double *counted = drv_slot_host(c, "counted");
    switch (p->kind) {
    case K_BLOCK: check_block(c, k); return;
    case K_MERGE:
        check_o_lse(c, drv_slot_host(c, "o"), k->o_ref, (size_t)p->rows * p->d, drv_slot_host(c, "lse"), k->lse_ref,
                    (size_t)p->rows, "cp_merge");
        return;
    case K_CONFIG: {
        static const char *names[] = {"CP_OK", "CP_ERR_SHAPE", "CP_ERR_HEADS", "CP_ERR_MISMATCH"};
        int32_t code;
        memcpy(&code, drv_slot_host(c, "code"), sizeof code);
        bool bad = code != k->expect_code;
        if (drv_sum(bad) > 0 && bad)
            drv_fail(c, "cp_config_check returned %d (%s) here, expected %s", code,
                     code >= 0 && code <= 3 ? names[code] : "not a code", names[k->expect_code]);
        return;
    }
    case K_POS: {
        int32_t count;
        memcpy(&count, drv_slot_host(c, "count"), sizeof count);
        const int32_t *pos = drv_slot_host(c, "pos");
        int rows = k->rows[c->rank];
        if (!drv_check_all(c, count == rows, "cp_positions(rank %d) returned %d; the %s layout gives it %d tokens",
                           c->rank, count, p->layout ? "zig-zag" : "contiguous", rows))
            return;
        int bad = -1;
        for (int i = 0; i < rows && bad < 0; i++)
            if (pos[i] != k->pos[i]) bad = i;
        drv_check_all(c, bad < 0, "cp_positions(rank %d): position [%d] is %d, expected %d (the %s layout)", c->rank, bad,
                      bad >= 0 ? pos[bad] : 0, bad >= 0 ? k->pos[bad] : 0, p->layout ? "zig-zag" : "contiguous");
        return;
    }
    case K_RING:
    case K_ULY:
    case K_USP: {
        int rows = k->rows[c->rank];
        size_t no = (size_t)rows * p->H * p->d, nl = (size_t)rows * p->H;
        k->o_ref = malloc((no + 1) * sizeof(double));
        k->lse_ref = malloc((nl + 1) * sizeof(double));
        PL_CHECK(k->o_ref && k->lse_ref, "out of host memory");
        reference(p, k->seed, k->pos, rows, k->o_ref, k->lse_ref);
        if (p->kind == K_ULY || p->kind == K_USP) {
            drv_check_tensor(c, p->kind == K_ULY ? "cp_ulysses_forward: o" : "cp_usp_forward: o", drv_slot_host(c, "o"),
                             k->o_ref, no, drv_tolerance());
            return;
        }
        check_o_lse(c, drv_slot_host(c, "o"), k->o_ref, no, drv_slot_host(c, "lse"), k->lse_ref, nl, "cp_ring_forward");
        check_ring_costs(c, k, counted, rows, "cp_ring_forward");
        return;
    }
    case K_RING_BWD:
    case K_ULY_BWD:
    case K_USP_BWD: {
        const char *fn = p->kind == K_RING_BWD ? "cp_ring_backward" : p->kind == K_ULY_BWD ? "cp_ulysses_backward" : "cp_usp_backward";
        char what[64];
        int rows = k->rows[c->rank];
        size_t nq = (size_t)rows * p->H * p->d, nk = (size_t)rows * p->Hkv * p->d;
        double *dq = malloc((nq + 1) * sizeof *dq), *dk = malloc((nk + 1) * sizeof *dk), *dv = malloc((nk + 1) * sizeof *dv);
        PL_CHECK(dq && dk && dv, "out of host memory");
        reference_backward(p, k->seed, k->pos, rows, dq, dk, dv);
        snprintf(what, sizeof what, "%s: dq", fn);
        drv_check_tensor(c, what, drv_slot_host(c, "dq"), dq, nq, drv_tolerance());
        snprintf(what, sizeof what, "%s: dk", fn);
        drv_check_tensor(c, what, drv_slot_host(c, "dk"), dk, nk, drv_tolerance());
        snprintf(what, sizeof what, "%s: dv", fn);
        drv_check_tensor(c, what, drv_slot_host(c, "dv"), dv, nk, drv_tolerance());
        free(dq), free(dk), free(dv);
        if (p->kind == K_RING_BWD) check_ring_costs(c, k, counted, rows, fn);
        return;
    }
    }
}

/* ---- traffic ------------------------------------------------------------------------------- */

void lab10_model(drv_case *c, drv_model *m) {
    lab10_case *k = c->state;
    const l10_params *p = &k->p;
    int n = c->world, me = c->rank;
    switch (p->kind) {
    case K_MERGE:
    case K_POS:
        m->no_collectives = true, m->exact_p2p = true, m->p2p_msgs = 0, m->p2p_bytes = 0;
        m->instead = "nothing: this function does not communicate";
        return;
    case K_CONFIG:
    case K_BLOCK: return; /* the block's all-reduce is the kit's; its attention's traffic is scored by its own cases */
    case K_RING: {
        /* step t sends the block of rank (me - t) mod n, K and V, for t = 0 .. n - 2 */
        double bytes = 0;
        for (int t = 0; t + 1 < n; t++) bytes += 2.0 * k->rows[(me - t + n) % n] * p->Hkv * p->d * sizeof(float);
        m->no_collectives = true, m->exact_p2p = true;
        m->p2p_msgs = 2.0 * (n - 1), m->p2p_bytes = bytes;
        m->no_leak = true;
        return;
    }
    case K_RING_BWD: {
        /* K and V as the forward's (the block of rank me - t in step t < n - 1), and every
         * block's dK and dV once around: n sends each, one per block of the sequence */
        double kv = 0, w = (double)p->Hkv * p->d * sizeof(float);
        for (int t = 0; t + 1 < n; t++) kv += 2.0 * k->rows[(me - t + n) % n] * w;
        m->no_collectives = true, m->exact_p2p = true;
        m->p2p_msgs = n > 1 ? 2.0 * (n - 1) + 2.0 * n : 0;
        m->p2p_bytes = n > 1 ? kv + 2.0 * p->S * w : 0;
        m->no_leak = true;
        return;
    }
    case K_USP:
    case K_USP_BWD: {
        /* the row's all-to-alls (Ulysses over the u ranks g u .. g u + u - 1: forward q, k, v
         * out and o back; backward q, k, v, dout out and dq, dk, dv back) and the column's
         * ring (K and V of the row blocks held in steps 0 .. r - 2; the backward: that once
         * for the recomputed forward, once more, and every row's dK and dV once around) */
        bool bwd = p->kind == K_USP_BWD;
        int u = p->u, r = n / u, g = me / u;
        double bytes = 0, w = (double)p->d * sizeof(float) / u, *rowS = calloc((size_t)r, sizeof(double)), kv = 0;
        PL_CHECK(rowS != NULL, "out of host memory");
        for (int i = 0; i < u; i++) {
            int peer = g * u + i;
            if (peer == me) continue;
            bytes += bwd ? k->rows[me] * (2.0 * p->H + 2.0 * p->Hkv) * w + (double)k->rows[peer] * (p->H + 2.0 * p->Hkv) * w
                         : k->rows[me] * (p->H + 2.0 * p->Hkv) * w + (double)k->rows[peer] * p->H * w;
        }
        for (int x = 0; x < r; x++)
            for (int i = 0; i < u; i++) rowS[x] += k->rows[x * u + i];
        for (int t = 0; t + 1 < r; t++) kv += 2.0 * rowS[(g - t + r) % r] * p->Hkv * w;
        free(rowS);
        bytes += bwd ? 2 * kv + (r > 1 ? 2.0 * p->S * p->Hkv * w : 0) : kv;
        m->no_collectives = true, m->exact_p2p = true;
        m->p2p_msgs = bwd ? 7.0 * (u - 1) + 4.0 * (r - 1) + (r > 1 ? 2.0 * r : 0) : 4.0 * (u - 1) + 2.0 * (r - 1);
        m->p2p_bytes = bytes;
        m->no_leak = true;
        return;
    }
    case K_ULY_BWD: {
        /* in: q, k, v, dout (this rank's tokens, each peer's heads); out: dq, dk, dv (each
         * peer's tokens, this rank's heads) */
        double bytes = 0, w = (double)p->d * sizeof(float) / n;
        for (int r = 0; r < n; r++)
            if (r != me) bytes += k->rows[me] * (2.0 * p->H + 2.0 * p->Hkv) * w + (double)k->rows[r] * (p->H + 2.0 * p->Hkv) * w;
        m->no_collectives = true, m->exact_p2p = true;
        m->p2p_msgs = 7.0 * (n - 1), m->p2p_bytes = bytes;
        m->no_leak = true;
        return;
    }
    case K_ULY: {
        /* q, k, v: this rank's tokens, each peer's heads, to each peer; o: each peer's
         * tokens, this rank's heads, back to it */
        double bytes = 0, w_in = (double)(p->H + 2 * p->Hkv) / n * p->d * sizeof(float);
        for (int r = 0; r < n; r++)
            if (r != me) bytes += k->rows[me] * w_in + (double)k->rows[r] * p->H / n * p->d * sizeof(float);
        m->no_collectives = true, m->exact_p2p = true;
        m->p2p_msgs = 4.0 * (n - 1), m->p2p_bytes = bytes;
        m->no_leak = true;
        return;
    }
    }
}

void lab10_teardown(drv_case *c) {
    lab10_case *k = c->state;
    if (!k) return;
    free(k->rows);
    free(k->pos);
    free(k->o_ref);
    free(k->lse_ref);
    free(k->y_ref);
    free(k->dx_ref);
    free(k->g_ref);
}
