/* test_kernels_ddp.c - the kernels the data-parallel lab trains with: GELU, bias, softmax
 * cross-entropy, SGD with momentum and AdamW.
 *
 * Each CPU reference is checked against the same formula in float64 (relative Frobenius
 * error <= 1e-6), each gradient against central finite differences of its forward on small
 * shapes, and each dispatcher against its reference (bit for bit on the cpu device).
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 when a check failed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bias.h"
#include "kern_gelu.h"
#include "kern_optim.h"
#include "kern_xent.h"
#include "pl.h"
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record

static const double REF_TOL = 1e-6; /* float reference vs float64 formula            */
static const double FD_TOL = 2e-3;  /* analytic gradient vs central differences      */
static int g_failed;

static void check(int cond, const char *fmt, double v) {
    if (!cond) g_failed++;
    printf("%s - ", cond ? "ok" : "not ok");
    printf(fmt, v);
    printf("\n");
}

static float *randf(size_t n, uint64_t id, float lo, float hi) {
    float *p = malloc(n * sizeof *p);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, 7, id, PL_RNG_UNIFORM, lo, hi);
    return p;
}

/* ---- GELU ---------------------------------------------------------------------------- */
static double gelu64(double x) {
    const double k = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}
static double dgelu64(double x) {
    const double k = sqrt(2.0 / M_PI);
    double t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

static void test_gelu(void) {
    size_t n = 4096;
    float *x = randf(n, 1, -6, 6), *dy = randf(n, 2, -1, 1), *y = malloc(n * 4), *dx = malloc(n * 4);
    double *w = malloc(n * 8);
    kern_gelu_forward_ref(y, x, n);
    for (size_t i = 0; i < n; i++) w[i] = gelu64(x[i]);
    double e = rel_err(y, w, n);
    check(e <= REF_TOL, "gelu forward reference vs float64 (rel err %.2e)", e);
    kern_gelu_backward_ref(dx, dy, x, n);
    for (size_t i = 0; i < n; i++) w[i] = dy[i] * dgelu64(x[i]);
    e = rel_err(dx, w, n);
    check(e <= REF_TOL, "gelu backward reference vs float64 (rel err %.2e)", e);

    /* finite differences of the float forward, on a few points */
    size_t m = 64;
    float *fd = malloc(m * 4), *one = malloc(m * 4), *an = malloc(m * 4);
    for (size_t i = 0; i < m; i++) one[i] = 1.0f;
    kern_gelu_backward_ref(an, one, x, m);
    for (size_t i = 0; i < m; i++) {
        float h = 1e-2f, xp = x[i] + h, xm = x[i] - h, yp, ym;
        kern_gelu_forward_ref(&yp, &xp, 1);
        kern_gelu_forward_ref(&ym, &xm, 1);
        fd[i] = (yp - ym) / (2 * h);
    }
    e = rel_err_ff(an, fd, m);
    check(e <= FD_TOL, "gelu backward vs finite differences (rel err %.2e)", e);

    /* dispatcher == reference, in place included */
    float *y2 = malloc(n * 4);
    memcpy(y2, x, n * 4);
    kern_gelu_forward(y2, y2, n, NULL);
    check(memcmp(y2, y, n * 4) == 0, "gelu dispatcher (in place) matches the reference bit for bit%.0s", 0);
    free(x), free(dy), free(y), free(dx), free(w), free(fd), free(one), free(an), free(y2);
}

/* ---- bias ---------------------------------------------------------------------------- */
static void test_bias(void) {
    int R = 37, C = 29;
    size_t n = (size_t)R * C;
    float *y = randf(n, 3, -1, 1), *b = randf(C, 4, -1, 1), *dy = randf(n, 5, -1, 1);
    float *y0 = malloc(n * 4), *db = calloc(C, 4);
    memcpy(y0, y, n * 4);
    double *w = malloc(n * 8);
    kern_bias_forward_ref(y, b, R, C);
    for (size_t i = 0; i < n; i++) w[i] = (double)y0[i] + b[i % C];
    double e = rel_err(y, w, n);
    check(e <= REF_TOL, "bias forward reference vs float64 (rel err %.2e)", e);
    kern_bias_backward_ref(db, dy, R, C);
    for (int c = 0; c < C; c++) {
        w[c] = 0;
        for (int r = 0; r < R; r++) w[c] += dy[(size_t)r * C + c];
    }
    e = rel_err(db, w, C);
    check(e <= REF_TOL, "bias backward (column sums) vs float64 (rel err %.2e)", e);
    /* accumulation: a second call adds the same sums */
    kern_bias_backward(db, dy, R, C, NULL);
    for (int c = 0; c < C; c++) w[c] *= 2;
    e = rel_err(db, w, C);
    check(e <= REF_TOL, "bias backward accumulates (+=) through the dispatcher (rel err %.2e)", e);

    /* finite differences of L = sum(dy * (y0 + b)) with respect to b */
    float *fd = malloc(C * 4), *an = calloc(C, 4), *t = malloc(n * 4);
    kern_bias_backward_ref(an, dy, R, C);
    for (int c = 0; c < C; c++) {
        double L[2];
        for (int s = 0; s < 2; s++) {
            float bb[64];
            memcpy(bb, b, C * 4);
            bb[c] += s ? -1e-2f : 1e-2f;
            memcpy(t, y0, n * 4);
            kern_bias_forward_ref(t, bb, R, C);
            L[s] = 0;
            for (size_t i = 0; i < n; i++) L[s] += (double)dy[i] * t[i];
        }
        fd[c] = (float)((L[0] - L[1]) / 2e-2);
    }
    e = rel_err_ff(an, fd, C);
    check(e <= FD_TOL, "bias backward vs finite differences (rel err %.2e)", e);
    free(y), free(b), free(dy), free(y0), free(db), free(w), free(fd), free(an), free(t);
}

/* ---- softmax cross-entropy ------------------------------------------------------------ */
static double xent_mean(const float *z, const int *tg, int N, int V) {
    float *loss = malloc(N * 4), *p = malloc((size_t)N * V * 4);
    kern_xent_forward_ref(loss, p, z, tg, N, V);
    double m = 0;
    for (int r = 0; r < N; r++) m += loss[r];
    free(loss), free(p);
    return m / N;
}

static void test_xent(void) {
    int N = 19, V = 10;
    size_t n = (size_t)N * V;
    float *z = randf(n, 6, -8, 8), *p = malloc(n * 4), *loss = malloc(N * 4), *dz = malloc(n * 4);
    int tg[64];
    for (int r = 0; r < N; r++) tg[r] = (r * 7 + 3) % V;
    z[0] = 80.0f; /* a large logit: the max subtraction must keep exp finite */
    double *wp = malloc(n * 8), wl[64];
    for (int r = 0; r < N; r++) {
        double m = -1e300, s = 0;
        for (int c = 0; c < V; c++) m = fmax(m, z[r * V + c]);
        for (int c = 0; c < V; c++) s += exp((double)z[r * V + c] - m);
        for (int c = 0; c < V; c++) wp[r * V + c] = exp((double)z[r * V + c] - m) / s;
        wl[r] = log(s) + m - z[r * V + tg[r]];
    }
    kern_xent_forward_ref(loss, p, z, tg, N, V);
    double e = rel_err(p, wp, n);
    check(e <= REF_TOL, "xent softmax reference vs float64 (rel err %.2e)", e);
    e = rel_err(loss, wl, N);
    check(e <= REF_TOL, "xent per-row loss reference vs float64 (rel err %.2e)", e);
    kern_xent_backward_ref(dz, p, tg, N, V);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < V; c++) wp[r * V + c] = (wp[r * V + c] - (c == tg[r])) / N;
    e = rel_err(dz, wp, n);
    check(e <= REF_TOL, "xent backward reference vs float64 (rel err %.2e)", e);

    /* finite differences of the mean loss, on moderate logits */
    float *z2 = randf(n, 8, -2, 2), *fd = malloc(n * 4);
    kern_xent_forward_ref(loss, p, z2, tg, N, V);
    kern_xent_backward_ref(dz, p, tg, N, V);
    for (size_t i = 0; i < n; i++) {
        float keep = z2[i];
        z2[i] = keep + 1e-2f;
        double lp = xent_mean(z2, tg, N, V);
        z2[i] = keep - 1e-2f;
        double lm = xent_mean(z2, tg, N, V);
        z2[i] = keep;
        fd[i] = (float)((lp - lm) / 2e-2);
    }
    e = rel_err_ff(dz, fd, n);
    check(e <= FD_TOL, "xent backward vs finite differences of the mean loss (rel err %.2e)", e);

    /* dispatchers on device buffers (host memory on cpu) match the references */
    float *d_z = pl_malloc_floats(n), *d_p = pl_malloc_floats(n), *d_l = pl_malloc_floats(N);
    float *d_dz = pl_malloc_floats(n), *hp = malloc(n * 4), *hdz = malloc(n * 4);
    int *d_tg = pl_malloc(N * sizeof(int));
    pl_upload(d_z, z2, n * 4);
    pl_upload(d_tg, tg, N * sizeof(int));
    kern_xent_forward(d_l, d_p, d_z, d_tg, N, V, NULL);
    kern_xent_backward(d_dz, d_p, d_tg, N, V, NULL);
    pl_download(hdz, d_dz, n * 4);
    check(rel_err_ff(hdz, dz, n) == 0, "xent dispatchers match the references (rel err %.2e)", rel_err_ff(hdz, dz, n));
    pl_free(d_z), pl_free(d_p), pl_free(d_l), pl_free(d_dz), pl_free(d_tg);
    free(z), free(p), free(loss), free(dz), free(wp), free(z2), free(fd), free(hp), free(hdz);
}

/* ---- optimizers ----------------------------------------------------------------------- */
static void test_optim(void) {
    size_t n = 1000;
    float *p = randf(n, 9, -1, 1), *g = randf(n, 10, -1, 1), *m = calloc(n, 4), *v = calloc(n, 4);
    double *wp = malloc(n * 8), *wm = calloc(n, 8), *wv = calloc(n, 8);
    for (size_t i = 0; i < n; i++) wp[i] = p[i];
    const double lr = 0.05, mu = 0.9, wd = 1e-2;
    for (int step = 0; step < 3; step++) {
        kern_optim_sgd_ref(p, m, g, n, (float)lr, (float)mu, (float)wd);
        for (size_t i = 0; i < n; i++) {
            double gg = g[i] + wd * wp[i];
            wm[i] = mu * wm[i] + gg;
            wp[i] -= lr * wm[i];
        }
    }
    double e = rel_err(p, wp, n);
    check(e <= REF_TOL, "sgd momentum reference vs float64 after 3 steps (rel err %.2e)", e);

    float *p2 = randf(n, 9, -1, 1);
    memset(m, 0, n * 4);
    for (size_t i = 0; i < n; i++) wp[i] = p2[i], wm[i] = 0;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, alr = 1e-2;
    for (int t = 1; t <= 3; t++) {
        kern_optim_adamw_ref(p2, m, v, g, n, (float)alr, (float)b1, (float)b2, (float)eps, (float)wd, t);
        for (size_t i = 0; i < n; i++) {
            wm[i] = b1 * wm[i] + (1 - b1) * g[i];
            wv[i] = b2 * wv[i] + (1 - b2) * (double)g[i] * g[i];
            wp[i] -= alr * wd * wp[i];
            wp[i] -= alr * (wm[i] / (1 - pow(b1, t))) / (sqrt(wv[i] / (1 - pow(b2, t))) + eps);
        }
    }
    e = rel_err(p2, wp, n);
    check(e <= REF_TOL, "adamw reference vs float64 after 3 steps (rel err %.2e)", e);

    /* the dispatcher on device buffers gives the reference's bits */
    float *q = randf(n, 11, -1, 1), *q2 = malloc(n * 4), *mm = calloc(n, 4), *vv = calloc(n, 4);
    float *d_q = pl_malloc_floats(n), *d_m = pl_malloc_floats(n), *d_v = pl_malloc_floats(n), *d_g = pl_malloc_floats(n);
    pl_upload(d_q, q, n * 4);
    pl_upload(d_g, g, n * 4);
    pl_fill(d_m, 0, n, NULL);
    pl_fill(d_v, 0, n, NULL);
    kern_optim_adamw(d_q, d_m, d_v, d_g, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 1e-2f, 1, NULL);
    kern_optim_sgd(d_q, d_m, d_g, n, 0.1f, 0.9f, 0.0f, NULL);
    kern_optim_adamw_ref(q, mm, vv, g, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 1e-2f, 1);
    kern_optim_sgd_ref(q, mm, g, n, 0.1f, 0.9f, 0.0f);
    pl_download(q2, d_q, n * 4);
    check(memcmp(q, q2, n * 4) == 0, "optimizer dispatchers match the references bit for bit%.0s", 0);
    pl_free(d_q), pl_free(d_m), pl_free(d_v), pl_free(d_g);
    free(p), free(g), free(m), free(v), free(wp), free(wm), free(wv), free(p2), free(q), free(q2), free(mm), free(vv);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_gelu();
    test_bias();
    test_xent();
    test_optim();
    pl_finalize();
    return g_failed ? 1 : 0;
}
