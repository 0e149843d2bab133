/* test_kernels_llama.c - the llama kernels (rmsnorm, rope, swiglu, KV-cache store and
 * grouped-query attention, argmax, row gather): each CPU reference against a float64
 * version written here, the properties the docs claim (rope depends only on relative
 * positions; adjacent-pair rope on permuted q/k rows equals rotate-half rope), each
 * dispatcher on the cpu device against its reference, and every dispatcher's trace record
 * against its kern_*_cost.
 *
 *   mpirun -np 1 build/cpu/tests/test_kernels_llama
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record
#include "kern_argmax.h"
#include "kern_gather.h"
#include "kern_gqa.h"
#include "kern_rmsnorm.h"
#include "kern_rope.h"
#include "kern_swiglu.h"
#include "pl_instrument.h" // defines: pl_trace_events, pl_trace_count (the harness's record)

#define REF_TOL 1e-6 /* float32 reference vs float64: relative Frobenius error */

static uint64_t g_id = 300;

static float *randf(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, 4243, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}
static double *dzeros(size_t n) { return calloc(n + 1, sizeof(double)); }
static float *fcopy(const float *x, size_t n) {
    float *p = malloc(n * sizeof(float) + 4);
    memcpy(p, x, n * sizeof(float));
    return p;
}

static void check_same(const char *what, const void *a, const void *b, size_t bytes) {
    tap_check(memcmp(a, b, bytes) == 0, what);
}

/* ================================================================================== */
/* rmsnorm                                                                             */
/* ================================================================================== */

static void test_rmsnorm(void) {
    int N = 9, C = 576;
    size_t n = (size_t)N * C;
    float eps = 1e-5f;
    float *x = randf(n, -3, 2), *w = randf(C, 0.5f, 1.5f), *out = malloc(n * 4);
    x[0] = 1e3f; /* one large value: the sum must not lose the small ones around it */
    double *want = dzeros(n);
    for (int i = 0; i < N; i++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)x[i * C + c] * x[i * C + c];
        double r = 1 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) want[i * C + c] = x[i * C + c] * r * w[c];
    }
    kern_rmsnorm_forward_ref(out, x, w, N, C, eps);
    check_rel("rmsnorm forward ref vs float64", out, want, n, REF_TOL);
    float *y = fcopy(x, n);
    kern_rmsnorm_forward(y, y, w, N, C, eps, NULL);
    check_same("rmsnorm dispatcher in place == ref on cpu", y, out, n * 4);
    free(x), free(w), free(out), free(want), free(y);
}

/* ================================================================================== */
/* rope                                                                                */
/* ================================================================================== */

static void rope64(double *x, const int *pos, int T, int H, int D, double theta, int halves) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D / 2; i++) {
                double a = pos[t] * pow(theta, -2.0 * i / D), c = cos(a), s = sin(a);
                double *p = x + ((size_t)t * H + h) * D;
                int i0 = halves ? i : 2 * i, i1 = halves ? i + D / 2 : 2 * i + 1; /* rotate-half or adjacent */
                double x0 = p[i0], x1 = p[i1];
                p[i0] = x0 * c - x1 * s;
                p[i1] = x0 * s + x1 * c;
            }
}

static double dot_f(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void test_rope(void) {
    int T = 6, H = 3, D = 64;
    int pos[6] = {0, 1, 7, 100, 2047, 8191};
    size_t n = (size_t)T * H * D;
    float *x = randf(n, -1, 1), *y = fcopy(x, n);
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++) want[i] = x[i];
    rope64(want, pos, T, H, D, 100000.0, 0);
    kern_rope_forward_ref(y, pos, T, H, D, 100000.0f);
    check_rel("rope ref vs float64 (adjacent pairs, positions up to 8191, theta 1e5)", y, want, n, REF_TOL);
    float *z = fcopy(x, n);
    kern_rope_forward(z, pos, T, H, D, 100000.0f, NULL);
    check_same("rope dispatcher (in place) == ref on cpu", z, y, n * 4);

    /* q . k after rope depends on the positions' difference only */
    int D2 = 16, p1[2] = {3, 10}, p2[2] = {503, 510};
    float *q = randf(D2, -1, 1), *k = randf(D2, -1, 1), a[2][16], b[2][16];
    memcpy(a[0], q, 4 * D2), memcpy(a[1], k, 4 * D2), memcpy(b[0], q, 4 * D2), memcpy(b[1], k, 4 * D2);
    kern_rope_forward_ref(a[0], p1, 2, 1, D2, 10000.0f); /* a[0] at 3, a[1] at 10 (one head each) */
    kern_rope_forward_ref(b[0], p2, 2, 1, D2, 10000.0f); /* the same, shifted by 500 */
    double d1 = dot_f(a[0], a[1], D2), d2 = dot_f(b[0], b[1], D2);
    char what[200];
    snprintf(what, sizeof what, "rope: q.k at positions (3, 10) equals q.k at (503, 510) (%.6f vs %.6f)", d1, d2);
    tap_check(fabs(d1 - d2) <= 1e-5 * (1 + fabs(d1)), what);

    /* the GGUF converter's row order: adjacent-pair rope on permuted q and k gives the
     * scores that rotate-half rope gives on the original rows */
    int T2 = 5, tp[5] = {0, 4, 9, 33, 250};
    size_t m = (size_t)T2 * D2;
    float *qs = randf(m, -1, 1), *ks = randf(m, -1, 1), *qp = malloc(m * 4), *kp = malloc(m * 4);
    double *qh = dzeros(m), *kh = dzeros(m);
    for (int t = 0; t < T2; t++)
        for (int i = 0; i < D2 / 2; i++) { /* row i -> 2i, row i + D/2 -> 2i + 1 */
            qp[t * D2 + 2 * i] = qs[t * D2 + i], qp[t * D2 + 2 * i + 1] = qs[t * D2 + i + D2 / 2];
            kp[t * D2 + 2 * i] = ks[t * D2 + i], kp[t * D2 + 2 * i + 1] = ks[t * D2 + i + D2 / 2];
        }
    for (size_t i = 0; i < m; i++) qh[i] = qs[i], kh[i] = ks[i];
    rope64(qh, tp, T2, 1, D2, 10000.0, 1);
    rope64(kh, tp, T2, 1, D2, 10000.0, 1);
    kern_rope_forward(qp, tp, T2, 1, D2, 10000.0f, NULL);
    kern_rope_forward(kp, tp, T2, 1, D2, 10000.0f, NULL);
    double worst = 0;
    for (int i = 0; i < T2; i++)
        for (int j = 0; j < T2; j++) {
            double s_half = 0;
            for (int e = 0; e < D2; e++) s_half += qh[i * D2 + e] * kh[j * D2 + e];
            worst = fmax(worst, fabs(dot_f(qp + i * D2, kp + j * D2, D2) - s_half));
        }
    snprintf(what, sizeof what,
             "rope: adjacent pairs on converter-permuted q/k rows give rotate-half's scores (max diff %.1e)", worst);
    tap_check(worst <= 1e-5, what);
    free(x), free(y), free(z), free(want), free(q), free(k), free(qs), free(ks), free(qp), free(kp), free(qh), free(kh);
}

/* ================================================================================== */
/* swiglu                                                                              */
/* ================================================================================== */

static void test_swiglu(void) {
    size_t n = 1003;
    float *g = randf(n, -8, 8), *u = randf(n, -2, 2), *out = malloc(n * 4);
    g[0] = -100.0f, g[1] = 100.0f, g[2] = 0.0f; /* e^-g overflows, underflows, is 1 */
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++) want[i] = g[i] / (1 + exp(-(double)g[i])) * u[i];
    kern_swiglu_forward_ref(out, g, u, n);
    check_rel("swiglu ref vs float64 (gate in [-8, 8], and -100, 100, 0)", out, want, n, REF_TOL);
    tap_check(isfinite(out[0]) && fabsf(out[0]) < 1e-30f && out[1] == 100.0f * u[1],
              "swiglu: silu(-100) is 0 and silu(100) is 100, no overflow");
    float *y = fcopy(g, n);
    kern_swiglu_forward(y, y, u, n, NULL);
    check_same("swiglu dispatcher in place (out = gate) == ref on cpu", y, out, n * 4);
    free(g), free(u), free(out), free(want), free(y);
}

/* ================================================================================== */
/* KV cache and grouped-query attention                                                */
/* ================================================================================== */

typedef struct { int S, L, G, D; } cache_shape; /* n_seq_max, n_ctx, n_kv_heads, head_dim */

static size_t cache_at(cache_shape c, int s, int p, int g) { return (((size_t)s * c.L + p) * c.G + g) * c.D; }

static void test_gqa(void) {
    cache_shape cs = {3, 16, 2, 8};
    int H = 6, D = cs.D, G = cs.G, grp = H / G;
    size_t nc = (size_t)cs.S * cs.L * G * D;
    float sc = 1.0f / sqrtf((float)D);
    float *K = randf(nc, -1, 1), *V = randf(nc, -1, 1); /* earlier tokens' keys, values */
    /* a batch: a prompt of sequence 2 (positions 0..3), a decode step of sequence 0 at 11,
     * sequence 1 at 15 (the last position), and one invalid token (sequence 3) */
    enum { T = 7 };
    int seq[T] = {2, 0, 2, 2, 1, 2, 3}, pos[T] = {0, 11, 1, 2, 15, 3, 0};
    float *k = randf((size_t)T * G * D, -1, 1), *v = randf((size_t)T * G * D, -1, 1);
    float *q = randf((size_t)T * H * D, -2, 2);
    float *K2 = fcopy(K, nc), *V2 = fcopy(V, nc);
    kern_kv_store_ref(K2, V2, k, v, seq, pos, T, G, D, cs.S, cs.L);
    /* what the store must have done, element by element */
    float *Kw = fcopy(K, nc), *Vw = fcopy(V, nc);
    for (int t = 0; t < T; t++) {
        if (seq[t] >= cs.S) continue;
        for (int g = 0; g < G; g++)
            for (int d = 0; d < D; d++) {
                Kw[cache_at(cs, seq[t], pos[t], g) + d] = k[((size_t)t * G + g) * D + d];
                Vw[cache_at(cs, seq[t], pos[t], g) + d] = v[((size_t)t * G + g) * D + d];
            }
    }
    tap_check(!memcmp(K2, Kw, nc * 4) && !memcmp(V2, Vw, nc * 4),
              "kv_store ref writes each token's k, v at (seq, pos) of [n_seq, n_ctx, n_kv, hd] and skips an invalid one");

    size_t no = (size_t)T * H * D;
    double *want = dzeros(no), *w = dzeros(cs.L);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            if (seq[t] >= cs.S) continue; /* zeros */
            int g = h / grp;
            double mx = -INFINITY, sum = 0;
            for (int p = 0; p <= pos[t]; p++) {
                double d = 0;
                for (int e = 0; e < D; e++) d += (double)q[((size_t)t * H + h) * D + e] * Kw[cache_at(cs, seq[t], p, g) + e];
                w[p] = d * sc;
                mx = fmax(mx, w[p]);
            }
            for (int p = 0; p <= pos[t]; p++) sum += (w[p] = exp(w[p] - mx));
            for (int e = 0; e < D; e++) {
                double acc = 0;
                for (int p = 0; p <= pos[t]; p++) acc += w[p] / sum * Vw[cache_at(cs, seq[t], p, g) + e];
                want[((size_t)t * H + h) * D + e] = acc;
            }
        }
    float *out = malloc(no * 4);
    pl_poison(out, no, NULL);
    kern_gqa_attention_forward_ref(out, q, K2, V2, seq, pos, T, H, G, D, cs.S, cs.L, sc);
    check_rel("gqa attention ref vs float64 (3 sequences, prefill + decode mixed, group 3, invalid token -> 0)", out,
              want, no, REF_TOL);

    /* the dispatchers: same bits as the references */
    float *K3 = fcopy(K, nc), *V3 = fcopy(V, nc), *out3 = malloc(no * 4);
    pl_poison(out3, no, NULL);
    int64_t attended = 0;
    for (int t = 0; t < T; t++) attended += pos[t] + 1;
    kern_kv_store(K3, V3, k, v, seq, pos, T, G, D, cs.S, cs.L, NULL);
    kern_gqa_attention_forward(out3, q, K3, V3, seq, pos, T, H, G, D, cs.S, cs.L, sc, attended, NULL);
    check_same("kv_store dispatcher == ref on cpu", K3, K2, nc * 4);
    check_same("gqa attention dispatcher == ref on cpu", out3, out, no * 4);

    /* large scores: the max subtraction keeps the softmax finite */
    for (size_t i = 0; i < (size_t)T * H * D; i++) q[i] *= 300.0f;
    kern_gqa_attention_forward_ref(out, q, K2, V2, seq, pos, T, H, G, D, cs.S, cs.L, sc);
    int finite = 1;
    for (size_t i = 0; i < no; i++) finite &= isfinite(out[i]) != 0;
    tap_check(finite, "gqa attention with scores near 1000: finite (stable softmax)");
    free(K), free(V), free(k), free(v), free(q), free(K2), free(V2), free(Kw), free(Vw), free(want), free(w);
    free(out), free(K3), free(V3), free(out3);
}

/* ================================================================================== */
/* argmax and gather                                                                   */
/* ================================================================================== */

static void test_argmax_gather(void) {
    enum { N = 5, V = 37 };
    float *x = randf((size_t)N * V, -5, 5);
    int want[N], got[N], got2[N];
    for (int i = 0; i < N; i++) {
        int b = 0;
        for (int j = 1; j < V; j++)
            if (x[i * V + j] > x[i * V + b]) b = j;
        want[i] = b;
    }
    x[1 * V + 30] = x[1 * V + 7] = 9.0f, want[1] = 7; /* a tie: the lower index */
    x[2 * V + 0] = NAN, x[2 * V + 3] = 9.5f, want[2] = 3;  /* a NaN is passed over */
    for (int j = 0; j < V; j++) x[3 * V + j] = NAN;
    want[3] = 0;                                          /* no number at all */
    for (int j = 0; j < V; j++) x[4 * V + j] = -INFINITY;
    x[4 * V + 20] = -1e30f, want[4] = 20;
    kern_argmax_ref(got, x, N, V);
    tap_check(!memcmp(got, want, sizeof want), "argmax ref: largest value, ties to the lowest index, NaN ignored");
    kern_argmax(got2, x, N, V, NULL);
    check_same("argmax dispatcher == ref on cpu", got2, got, sizeof got);

    int C = 11, idx[4] = {3, 0, 3, 4};
    float *src = randf((size_t)5 * C, -1, 1), out[44], out2[44];
    kern_gather_rows_ref(out, src, idx, 4, C);
    int ok = 1;
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < C; c++) ok &= out[i * C + c] == src[idx[i] * C + c];
    tap_check(ok, "gather_rows ref: out[i] = src[idx[i]] (a row twice)");
    kern_gather_rows(out2, src, idx, 4, C, NULL);
    check_same("gather_rows dispatcher == ref on cpu", out2, out, sizeof out);
    free(x), free(src);
}

/* ================================================================================== */
/* trace records                                                                       */
/* ================================================================================== */

static void test_recording(void) {
    enum { N = 8, C = 16, T = 3, H = 4, G = 2, D = 8, S = 2, L = 8 }; /* x, y hold T * H * D = 96 <= N * C */
    float *x = pl_malloc_floats(N * C), *w = pl_malloc_floats(C), *y = pl_malloc_floats(N * C);
    float *kc = pl_malloc_floats(S * L * G * D), *vc = pl_malloc_floats(S * L * G * D);
    int *pos = pl_malloc(T * sizeof(int)), *seq = pl_malloc(T * sizeof(int)), *idx = pl_malloc(N * sizeof(int));
    int hp[T] = {0, 1, 5}, hs[T] = {0, 0, 1};
    pl_upload(pos, hp, sizeof hp), pl_upload(seq, hs, sizeof hs);
    pl_fill(x, 0.5f, N * C, NULL), pl_fill(w, 1.0f, C, NULL), pl_fill(kc, 0.25f, S * L * G * D, NULL);
    pl_fill(vc, 1.0f, S * L * G * D, NULL), pl_memset(idx, 0, N * sizeof(int), NULL);
    double by, fl;
    kern_rmsnorm_forward(y, x, w, N, C, 1e-5f, NULL), kern_rmsnorm_cost(N, C, &by, &fl), check_record("rmsnorm_fwd", by, fl);
    kern_rope_forward(y, pos, T, H, D, 1e4f, NULL), kern_rope_cost(T, H, D, &by, &fl), check_record("rope_fwd", by, fl);
    kern_swiglu_forward(y, x, y, N * C, NULL), kern_swiglu_cost(N * C, &by, &fl), check_record("swiglu_fwd", by, fl);
    kern_kv_store(kc, vc, x, x, seq, pos, T, G, D, S, L, NULL), kern_kv_store_cost(T, G, D, &by, &fl);
    check_record("kv_store", by, fl);
    kern_gqa_attention_forward(y, x, kc, vc, seq, pos, T, H, G, D, S, L, 0.35f, 1 + 2 + 6, NULL);
    kern_gqa_attention_cost(T, H, G, D, 9, &by, &fl), check_record("gqa_attention_fwd", by, fl);
    kern_argmax(idx, x, N, C, NULL), kern_argmax_cost(N, C, &by, &fl), check_record("argmax", by, fl);
    kern_gather_rows(y, x, idx, N, C, NULL), kern_gather_cost(N, C, &by, &fl), check_record("gather_rows", by, fl);
    pl_device_sync();
    pl_free(x), pl_free(w), pl_free(y), pl_free(kc), pl_free(vc), pl_free(pos), pl_free(seq), pl_free(idx);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_rmsnorm();
    test_rope();
    test_swiglu();
    test_gqa();
    test_argmax_gather();
    test_recording();
    return tap_finish();
}
