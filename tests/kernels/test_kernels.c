/* test_kernels.c - the CPU references of kernels/ (layernorm, residual, causal softmax,
 * attention, embedding) against float64 versions written here, every gradient against
 * central finite differences of the float64 forward, and each dispatcher on the cpu
 * device against its reference, and every dispatcher's trace record against its kern_*_cost.
 * Prints one "ok - ..." / "not ok - ..." line per check.
 *
 *   mpirun -np 1 build/cpu/tests/test_kernels
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record
#include "kern_attention.h"
#include "kern_bias.h"
#include "kern_embedding.h"
#include "kern_gelu.h"
#include "kern_layernorm.h"
#include "kern_optim.h"
#include "kern_residual.h"
#include "kern_softmax.h"
#include "kern_xent.h"

#define REF_TOL 1e-6 /* float32 reference vs float64: relative Frobenius error       */
#define FD_TOL 1e-5  /* float32 backward vs float64 finite differences (h = 1e-5)   */
#define FD_H 1e-5

static uint64_t g_id = 100;

static float *randf(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 1);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, 4242, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}
static double *todouble(const float *x, size_t n) {
    double *d = malloc(n * sizeof(double) + 1);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static double *dzeros(size_t n) { return calloc(n + 1, sizeof(double)); }
static float *fzeros(size_t n) { return calloc(n + 1, sizeof(float)); }

static void check_same(const char *what, const float *a, const float *b, size_t n) {
    tap_check(memcmp(a, b, n * sizeof(float)) == 0, what);
}

/* A float64 forward with its output size; loss = sum(out * g) for the finite differences. */
typedef void (*fwd64)(double *out, double *const *in, const void *shape);

static double loss64(fwd64 f, double *out, double *const *in, const void *shape, const double *g,
                     size_t nout) {
    f(out, in, shape);
    double l = 0;
    for (size_t i = 0; i < nout; i++) l += out[i] * g[i];
    return l;
}

/* d loss / d in[which][i] for every i by central differences, into grad. */
static void fd_grad(fwd64 f, double *const *in, int which, size_t nin, const void *shape,
                    const double *g, size_t nout, double *grad) {
    double *out = dzeros(nout);
    for (size_t i = 0; i < nin; i++) {
        double keep = in[which][i];
        in[which][i] = keep + FD_H;
        double lp = loss64(f, out, in, shape, g, nout);
        in[which][i] = keep - FD_H;
        double lm = loss64(f, out, in, shape, g, nout);
        in[which][i] = keep;
        grad[i] = (lp - lm) / (2 * FD_H);
    }
    free(out);
}

/* ================================================================================== */
/* layernorm                                                                           */
/* ================================================================================== */

typedef struct { int N, C; double eps; } ln_shape;

static void ln64(double *out, double *const *in, const void *sh) {
    const ln_shape *s = sh;
    const double *x = in[0], *w = in[1], *b = in[2];
    for (int i = 0; i < s->N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < s->C; c++) m += x[i * s->C + c];
        m /= s->C;
        for (int c = 0; c < s->C; c++) v += (x[i * s->C + c] - m) * (x[i * s->C + c] - m);
        v /= s->C;
        double r = 1 / sqrt(v + s->eps);
        for (int c = 0; c < s->C; c++) out[i * s->C + c] = (x[i * s->C + c] - m) * r * w[c] + b[c];
    }
}

static void test_layernorm(void) {
    ln_shape sh = {7, 48, 1e-5};
    int N = sh.N, C = sh.C;
    size_t n = (size_t)N * C;
    float *x = randf(n, -2, 3), *w = randf(C, 0.5f, 1.5f), *b = randf(C, -1, 1), *g = randf(n, -1, 1);
    float *out = fzeros(n), *mean = fzeros(N), *rstd = fzeros(N);
    kern_layernorm_forward_ref(out, mean, rstd, x, w, b, N, C, (float)sh.eps);
    double *in[3] = {todouble(x, n), todouble(w, C), todouble(b, C)}, *out64 = dzeros(n);
    ln64(out64, in, &sh);
    check_rel("layernorm forward ref vs float64", out, out64, n, REF_TOL);

    float *dx = fzeros(n), *dw = fzeros(C), *db = fzeros(C);
    kern_layernorm_backward_ref(dx, dw, db, g, x, w, mean, rstd, N, C);
    double *g64 = todouble(g, n), *fd = dzeros(n);
    fd_grad(ln64, in, 0, n, &sh, g64, n, fd);
    check_rel("layernorm backward dinp vs finite differences", dx, fd, n, FD_TOL);
    fd_grad(ln64, in, 1, C, &sh, g64, n, fd);
    check_rel("layernorm backward dweight vs finite differences", dw, fd, C, FD_TOL);
    fd_grad(ln64, in, 2, C, &sh, g64, n, fd);
    check_rel("layernorm backward dbias vs finite differences", db, fd, C, FD_TOL);

    /* dispatchers on the cpu device: the reference, bit for bit; weight grads accumulate */
    float *out2 = fzeros(n), *mean2 = fzeros(N), *rstd2 = fzeros(N);
    kern_layernorm_forward(out2, mean2, rstd2, x, w, b, N, C, (float)sh.eps, NULL);
    check_same("layernorm forward dispatcher == ref on cpu", out, out2, n);
    float *dx2 = fzeros(n), *dw2 = fzeros(C), *db2 = fzeros(C);
    kern_layernorm_backward(dx2, dw2, db2, g, x, w, mean, rstd, N, C, NULL);
    kern_layernorm_backward(dx2, dw2, db2, g, x, w, mean, rstd, N, C, NULL);
    int acc_ok = 1;
    for (int c = 0; c < C; c++) acc_ok &= fabsf(dw2[c] - 2 * dw[c]) <= 1e-5f * (1 + fabsf(dw[c])) && fabsf(db2[c] - 2 * db[c]) <= 1e-5f * (1 + fabsf(db[c]));
    tap_check(acc_ok && memcmp(dx, dx2, n * sizeof(float)) == 0,
              "layernorm backward dispatcher: dinp written, dweight/dbias accumulated");
    free(x); free(w); free(b); free(g); free(out); free(mean); free(rstd); free(out64);
    for (int i = 0; i < 3; i++) free(in[i]);
    free(dx); free(dw); free(db); free(g64); free(fd); free(out2); free(mean2); free(rstd2);
    free(dx2); free(dw2); free(db2);
}

/* ================================================================================== */
/* residual                                                                            */
/* ================================================================================== */

static void test_residual(void) {
    size_t n = 1001;
    float *a = randf(n, -1, 1), *b = randf(n, -1, 1), *d = randf(n, -1, 1), *out = fzeros(n);
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++) want[i] = (double)a[i] + b[i];
    kern_residual_forward_ref(out, a, b, n);
    check_rel("residual forward ref vs float64", out, want, n, REF_TOL);
    float *out2 = fzeros(n);
    kern_residual_forward(out2, a, b, n, NULL);
    check_same("residual forward dispatcher == ref on cpu", out, out2, n);
    float *da = fzeros(n), *db = fzeros(n);
    kern_residual_backward(da, db, d, n, NULL);
    kern_residual_backward(da, db, d, n, NULL);
    for (size_t i = 0; i < n; i++) want[i] = 2.0 * d[i];
    double e = fmax(rel_err(da, want, n), rel_err(db, want, n));
    tap_check(e <= REF_TOL, "residual backward: both branches accumulate dout");
    free(a); free(b); free(d); free(out); free(want); free(out2); free(da); free(db);
}

/* ================================================================================== */
/* causal softmax                                                                      */
/* ================================================================================== */

typedef struct { int R, T; double scale; } sm_shape;

static void sm64(double *out, double *const *in, const void *sh) {
    const sm_shape *s = sh;
    for (int row = 0; row < s->R * s->T; row++) {
        int t = row % s->T;
        const double *x = in[0] + (size_t)row * s->T;
        double *p = out + (size_t)row * s->T, mx = -INFINITY, sum = 0;
        for (int j = 0; j <= t; j++) mx = fmax(mx, s->scale * x[j]);
        for (int j = 0; j <= t; j++) sum += exp(s->scale * x[j] - mx);
        for (int j = 0; j < s->T; j++) p[j] = j <= t ? exp(s->scale * x[j] - mx) / sum : 0;
    }
}

static void test_softmax(void) {
    sm_shape sh = {3, 9, 0.35};
    size_t n = (size_t)sh.R * sh.T * sh.T;
    float *x = randf(n, -4, 4), *g = randf(n, -1, 1), *p = fzeros(n);
    kern_softmax_forward_ref(p, x, sh.R, sh.T, (float)sh.scale);
    double *in[1] = {todouble(x, n)}, *p64 = dzeros(n);
    sm64(p64, in, &sh);
    check_rel("softmax forward ref vs float64 (masked entries 0)", p, p64, n, REF_TOL);
    float *ds = fzeros(n);
    kern_softmax_backward_ref(ds, g, p, sh.R, sh.T, (float)sh.scale);
    double *g64 = todouble(g, n), *fd = dzeros(n);
    fd_grad(sm64, in, 0, n, &sh, g64, n, fd);
    check_rel("softmax backward vs finite differences", ds, fd, n, FD_TOL);
    /* in place, through the dispatchers */
    float *q = malloc(n * sizeof(float)), *dq = malloc(n * sizeof(float));
    memcpy(q, x, n * sizeof(float));
    kern_softmax_forward(q, q, sh.R, sh.T, (float)sh.scale, NULL);
    check_same("softmax forward dispatcher in place == ref on cpu", p, q, n);
    memcpy(dq, g, n * sizeof(float));
    kern_softmax_backward(dq, dq, p, sh.R, sh.T, (float)sh.scale, NULL);
    check_same("softmax backward dispatcher in place == ref on cpu", ds, dq, n);
    free(x); free(g); free(p); free(in[0]); free(p64); free(ds); free(g64); free(fd); free(q); free(dq);
}

/* ================================================================================== */
/* attention                                                                           */
/* ================================================================================== */

typedef struct { int T, B, H, hs; double scale; } at_shape;

static void at64(double *out, double *const *in, const void *sh) {
    const at_shape *s = sh;
    int T = s->T, B = s->B, H = s->H, hs = s->hs;
    size_t ldq = (size_t)3 * H * hs, ldo = (size_t)H * hs;
    const double *qkv = in[0];
    double *p = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)t * B + b) * ldq + (size_t)3 * hs * h;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = qkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + hs;
                    double d = 0;
                    for (int e = 0; e < hs; e++) d += q[e] * k[e];
                    p[j] = s->scale * d;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
                double *o = out + ((size_t)t * B + b) * ldo + (size_t)hs * h;
                for (int e = 0; e < hs; e++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += p[j] / sum * qkv[((size_t)j * B + b) * ldq + (size_t)3 * hs * h + 2 * hs + e];
                    o[e] = acc;
                }
            }
    free(p);
}

static void test_attention(void) {
    at_shape sh = {5, 2, 3, 4, 0.0};
    sh.scale = 1.0 / sqrt((double)sh.hs);
    int T = sh.T, B = sh.B, H = sh.H, hs = sh.hs;
    float sc = (float)sh.scale;
    size_t nq = (size_t)T * B * 3 * H * hs, no = (size_t)T * B * H * hs, np = (size_t)B * H * T * T;
    float *qkv = randf(nq, -1, 1), *g = randf(no, -1, 1);
    float *out = fzeros(no), *probs = fzeros(np);
    kern_attention_forward_ref(out, probs, qkv, T, B, H, hs, sc);
    double *in[1] = {todouble(qkv, nq)}, *o64 = dzeros(no);
    at64(o64, in, &sh);
    check_rel("attention forward ref vs float64", out, o64, no, REF_TOL);
    float *dqkv = fzeros(nq), *scratch = fzeros(np);
    kern_attention_backward_ref(dqkv, scratch, g, qkv, probs, T, B, H, hs, sc);
    double *g64 = todouble(g, no), *fd = dzeros(nq);
    fd_grad(at64, in, 0, nq, &sh, g64, no, fd);
    check_rel("attention backward dqkv vs finite differences", dqkv, fd, nq, FD_TOL);

    /* the dispatcher (pl_gemm + softmax) against the plain loops, poisoned outputs */
    float *out2 = malloc(no * sizeof(float)), *probs2 = malloc(np * sizeof(float));
    float *dqkv2 = malloc(nq * sizeof(float)), *scratch2 = malloc(np * sizeof(float));
    pl_poison(out2, no, NULL);
    pl_poison(probs2, np, NULL);
    pl_poison(dqkv2, nq, NULL);
    pl_poison(scratch2, np, NULL);
    kern_attention_forward(out2, probs2, qkv, T, B, H, hs, sc, NULL);
    double *ref = todouble(out, no);
    check_rel("attention forward dispatcher (pl_gemm + softmax) vs ref", out2, ref, no, 1e-6);
    kern_attention_backward(dqkv2, scratch2, g, qkv, probs2, T, B, H, hs, sc, NULL);
    free(ref);
    ref = todouble(dqkv, nq);
    check_rel("attention backward dispatcher (pl_gemm + softmax) vs ref", dqkv2, ref, nq, 1e-6);
    free(ref); free(qkv); free(g); free(out); free(probs); free(in[0]); free(o64); free(dqkv);
    free(scratch); free(g64); free(fd); free(out2); free(probs2); free(dqkv2); free(scratch2);
}

/* ================================================================================== */
/* embedding                                                                           */
/* ================================================================================== */

typedef struct { int T, B, C, t0; const int *tok; } em_shape;

static void em64(double *out, double *const *in, const void *sh) {
    const em_shape *s = sh;
    for (int t = 0; t < s->T; t++)
        for (int b = 0; b < s->B; b++)
            for (int c = 0; c < s->C; c++)
                out[((size_t)t * s->B + b) * s->C + c] =
                    in[0][(size_t)s->tok[t * s->B + b] * s->C + c] + in[1][(size_t)(s->t0 + t) * s->C + c];
}

static void test_embedding(void) {
    int V = 11, maxT = 9, T = 4, B = 3, C = 8, t0 = 2;
    int tok[12];
    for (int i = 0; i < T * B; i++) tok[i] = (i * 7 + 3) % V; /* token 3 and others repeat */
    tok[5] = tok[0];
    em_shape sh = {T, B, C, t0, tok};
    size_t no = (size_t)T * B * C;
    float *wte = randf((size_t)V * C, -1, 1), *wpe = randf((size_t)maxT * C, -1, 1), *g = randf(no, -1, 1);
    float *out = fzeros(no);
    kern_embedding_forward_ref(out, tok, wte, wpe, T, B, C, t0);
    double *in[2] = {todouble(wte, (size_t)V * C), todouble(wpe, (size_t)maxT * C)}, *o64 = dzeros(no);
    em64(o64, in, &sh);
    check_rel("embedding forward ref vs float64", out, o64, no, REF_TOL);
    float *dwte = fzeros((size_t)V * C), *dwpe = fzeros((size_t)maxT * C);
    kern_embedding_backward_ref(dwte, dwpe, g, tok, T, B, C, t0);
    double *g64 = todouble(g, no), *fd = dzeros((size_t)maxT * C > (size_t)V * C ? (size_t)maxT * C : (size_t)V * C);
    fd_grad(em64, in, 0, (size_t)V * C, &sh, g64, no, fd);
    check_rel("embedding backward dwte (repeated tokens) vs finite differences", dwte, fd, (size_t)V * C, FD_TOL);
    fd_grad(em64, in, 1, (size_t)maxT * C, &sh, g64, no, fd);
    check_rel("embedding backward dwpe (offset t0) vs finite differences", dwpe, fd, (size_t)maxT * C, FD_TOL);
    float *out2 = fzeros(no);
    kern_embedding_forward(out2, tok, wte, wpe, T, B, C, t0, NULL);
    check_same("embedding forward dispatcher == ref on cpu", out, out2, no);
    free(wte); free(wpe); free(g); free(out); free(in[0]); free(in[1]); free(o64); free(dwte);
    free(dwpe); free(g64); free(fd); free(out2);
}

static void test_recording(void) {
    enum { R = 6, C = 10, N = R * C };
    float *a = pl_malloc_floats(N), *b = pl_malloc_floats(N), *c = pl_malloc_floats(N), *d = pl_malloc_floats(N);
    float *m = pl_malloc_floats(N), *v = pl_malloc_floats(N);
    int *tok = pl_malloc(R * sizeof(int));
    pl_fill(a, 0.5f, N, NULL), pl_fill(b, 0.25f, N, NULL), pl_fill(c, 0.0f, N, NULL), pl_fill(d, 1.0f, N, NULL);
    pl_fill(m, 0.0f, N, NULL), pl_fill(v, 0.0f, N, NULL);
    pl_memset(tok, 0, R * sizeof(int), NULL);
    double by, fl;
    kern_gelu_forward(b, a, N, NULL), kern_gelu_cost(N, 0, &by, &fl), check_record("gelu_fwd", by, fl);
    kern_gelu_backward(c, d, a, N, NULL), kern_gelu_cost(N, 1, &by, &fl), check_record("gelu_bwd", by, fl);
    kern_bias_forward(b, a, R, C, NULL), kern_bias_cost(R, C, 0, &by, &fl), check_record("bias_fwd", by, fl);
    kern_bias_backward(c, a, R, C, NULL), kern_bias_cost(R, C, 1, &by, &fl), check_record("bias_bwd", by, fl);
    kern_residual_forward(c, a, b, N, NULL), kern_residual_cost(N, 0, &by, &fl), check_record("residual_fwd", by, fl);
    kern_residual_backward(c, d, a, N, NULL), kern_residual_cost(N, 1, &by, &fl), check_record("residual_bwd", by, fl);
    /* 2 positions x 3 sequences x 10 channels; wte has one row (token 0), wpe two */
    kern_embedding_forward(c, tok, a, b, 2, 3, C, 0, NULL), kern_embedding_cost(2, 3, C, 0, &by, &fl);
    check_record("embedding_fwd", by, fl);
    kern_embedding_backward(d, m, a, tok, 2, 3, C, 0, NULL), kern_embedding_cost(2, 3, C, 1, &by, &fl);
    check_record("embedding_bwd", by, fl);
    kern_layernorm_forward(c, m, v, a, b, d, R, C, 1e-5f, NULL), kern_layernorm_cost(R, C, 0, &by, &fl);
    check_record("layernorm_fwd", by, fl);
    kern_layernorm_backward(c, m + C, v + C, a, b, d, m, v, R, C, NULL), kern_layernorm_cost(R, C, 1, &by, &fl);
    check_record("layernorm_bwd", by, fl);
    /* 1 row group of T = 6 scores per row (6 x 6 = 36 <= N) */
    kern_softmax_forward(c, a, 1, 6, 1.0f, NULL), kern_softmax_cost(1, 6, 0, &by, &fl), check_record("softmax_fwd", by, fl);
    kern_softmax_backward(d, a, c, 1, 6, 1.0f, NULL), kern_softmax_cost(1, 6, 1, &by, &fl), check_record("softmax_bwd", by, fl);
    kern_xent_forward(m, c, a, tok, R, C, NULL), kern_xent_cost(R, C, 0, &by, &fl), check_record("xent_fwd", by, fl);
    kern_xent_backward(d, c, tok, R, C, NULL), kern_xent_cost(R, C, 1, &by, &fl), check_record("xent_bwd", by, fl);
    kern_optim_sgd(a, m, b, N, 0.1f, 0.9f, 0.0f, NULL), kern_optim_cost(N, 0, &by, &fl), check_record("sgd", by, fl);
    kern_optim_adamw(a, m, v, b, N, 0.1f, 0.9f, 0.99f, 1e-8f, 0.0f, 1, NULL), kern_optim_cost(N, 1, &by, &fl);
    check_record("adamw", by, fl);
    pl_device_sync();
    pl_free(a), pl_free(b), pl_free(c), pl_free(d), pl_free(m), pl_free(v), pl_free(tok);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_layernorm();
    test_residual();
    test_softmax();
    test_attention();
    test_embedding();
    test_recording();
    return tap_finish();
}
