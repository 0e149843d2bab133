/* test_kernels_flash.c - Lab 10's kernels (kernels/kern_flash.h) on the CPU: a key range
 * split into blocks, each block by kern_flash_block, merged by kern_flash_merge, against
 * the float64 attention over all the keys (causal and full, MHA and GQA, positions out of
 * order as the zig-zag layout gives them); rows that see no key; the merge of huge
 * log-sum-exps; the backward, block by block with the final (o, lse), against the float64
 * gradients of the whole attention (its loss checked by central differences); the
 * dispatchers' trace records against their cost functions.
 *
 *   mpirun -np 1 build/cpu/tests/test_kernels_flash
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h"   // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: check_rel, check_record
#include "kern_flash.h"

#define REF_TOL 1e-6

static uint64_t g_id = 3100;

static float *randf(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, 4343, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}

/* float64 attention of every query over every key it sees */
static void attn64(double *o, double *lse, const float *q, const float *k, const float *v, const int *qp,
                   const int *kp, int nq, int nk, int H, int Hkv, int d, int causal) {
    double scale = 1.0 / sqrt((double)d), *s = malloc((size_t)(nk + 1) * sizeof *s);
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < H; h++) {
            int kh = h / (H / Hkv);
            double m = -INFINITY, sum = 0;
            for (int j = 0; j < nk; j++) {
                s[j] = -INFINITY;
                if (causal && kp[j] > qp[i]) continue;
                double dot = 0;
                for (int x = 0; x < d; x++)
                    dot += (double)q[((size_t)i * H + h) * d + x] * k[((size_t)j * Hkv + kh) * d + x];
                s[j] = scale * dot;
                m = fmax(m, s[j]);
            }
            double *oi = o + ((size_t)i * H + h) * d;
            for (int x = 0; x < d; x++) oi[x] = 0;
            for (int j = 0; j < nk; j++) {
                if (s[j] == -INFINITY) continue;
                double w = exp(s[j] - m);
                sum += w;
                for (int x = 0; x < d; x++) oi[x] += w * v[((size_t)j * Hkv + kh) * d + x];
            }
            for (int x = 0; x < d; x++) oi[x] = sum > 0 ? oi[x] / sum : 0;
            lse[(size_t)i * H + h] = sum > 0 ? m + log(sum) : -INFINITY;
        }
    free(s);
}

/* keys split into `blocks` blocks, each computed alone and merged in */
static void test_blocks(int nq, int nk, int H, int Hkv, int d, int causal, int blocks, bool zigzag) {
    size_t nqe = (size_t)nq * H * d, nke = (size_t)nk * Hkv * d;
    float *q = randf(nqe, -2, 2), *k = randf(nke, -1, 1), *v = randf(nke, -1, 1);
    int *qp = malloc((size_t)nq * sizeof(int)), *kp = malloc((size_t)nk * sizeof(int));
    /* queries at positions spread over the keys' range, keys in order or zig-zagged */
    for (int i = 0; i < nq; i++) qp[i] = (int)((long)i * nk / nq) + (zigzag ? (i % 2) * (nk / 3) : 0);
    if (causal) qp[0] = -1; /* a query before every key: it sees none */
    for (int j = 0; j < nk; j++) kp[j] = zigzag ? (j % 2 ? nk - 1 - j / 2 : j / 2) : j;
    double *o64 = malloc(nqe * sizeof(double)), *l64 = malloc((size_t)nq * H * sizeof(double));
    attn64(o64, l64, q, k, v, qp, kp, nq, nk, H, Hkv, d, causal);
    float *o = malloc(nqe * sizeof(float)), *lse = malloc((size_t)nq * H * sizeof(float));
    float *ob = malloc(nqe * sizeof(float)), *lb = malloc((size_t)nq * H * sizeof(float));
    for (size_t i = 0; i < nqe; i++) o[i] = 0;
    for (int i = 0; i < nq * H; i++) lse[i] = -INFINITY;
    float sc = 1.0f / sqrtf((float)d);
    for (int b = 0; b < blocks; b++) {
        int j0 = (int)((long)b * nk / blocks), j1 = (int)((long)(b + 1) * nk / blocks);
        kern_flash_block(ob, lb, q, k + (size_t)j0 * Hkv * d, v + (size_t)j0 * Hkv * d, qp, kp + j0, nq, j1 - j0, H,
                         Hkv, d, causal, sc, NULL);
        kern_flash_merge(o, lse, ob, lb, nq * H, d, NULL);
    }
    pl_device_sync();
    char what[200];
    snprintf(what, sizeof what, "flash: %d blocks merged = attention over %d keys (%s, H %d, Hkv %d, d %d%s): o", blocks,
             nk, causal ? "causal" : "full", H, Hkv, d, zigzag ? ", zig-zag positions" : "");
    check_rel(what, o, o64, nqe, REF_TOL);
    size_t inf_bad = 0, nf = 0;
    for (int i = 0; i < nq * H; i++) {
        inf_bad += (l64[i] == -INFINITY) != (lse[i] == -INFINITY);
        if (l64[i] != -INFINITY) l64[nf] = l64[i], lse[nf++] = lse[i];
    }
    snprintf(what, sizeof what, "flash: %d blocks merged: lse -inf exactly where no key is seen (%zu wrong)", blocks,
             inf_bad);
    tap_check(inf_bad == 0, what);
    snprintf(what, sizeof what, "flash: %d blocks merged (%s, H %d, Hkv %d): lse", blocks, causal ? "causal" : "full", H, Hkv);
    check_rel(what, lse, l64, nf, REF_TOL);
    free(q), free(k), free(v), free(qp), free(kp), free(o64), free(l64), free(o), free(lse), free(ob), free(lb);
}

/* float64 gradients of loss = sum(o * g) of the whole attention: the full softmax P,
 * dV = P^T g, dP = g V^T, dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q */
static void grad64(double *dq, double *dk, double *dv, const double *q, const double *k, const double *v,
                   const double *g, const int *qp, const int *kp, int nq, int nk, int H, int Hkv, int d, int causal) {
    double scale = 1.0 / sqrt((double)d), *p = malloc((size_t)(nk + 1) * sizeof *p), *dp = malloc((size_t)(nk + 1) * sizeof *dp);
    memset(dq, 0, (size_t)nq * H * d * sizeof *dq);
    memset(dk, 0, (size_t)nk * Hkv * d * sizeof *dk);
    memset(dv, 0, (size_t)nk * Hkv * d * sizeof *dv);
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < H; h++) {
            int kh = h / (H / Hkv);
            const double *qi = q + ((size_t)i * H + h) * d, *gi = g + ((size_t)i * H + h) * d;
            double m = -INFINITY, sum = 0, dot = 0;
            for (int j = 0; j < nk; j++) {
                p[j] = -INFINITY;
                if (causal && kp[j] > qp[i]) continue;
                double s_ = 0;
                for (int x = 0; x < d; x++) s_ += qi[x] * k[((size_t)j * Hkv + kh) * d + x];
                p[j] = scale * s_;
                m = fmax(m, p[j]);
            }
            if (m == -INFINITY) continue;
            for (int j = 0; j < nk; j++) sum += (p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - m));
            for (int j = 0; j < nk; j++) {
                p[j] /= sum;
                dp[j] = 0;
                for (int x = 0; x < d; x++) dp[j] += gi[x] * v[((size_t)j * Hkv + kh) * d + x];
                dot += p[j] * dp[j];
            }
            for (int j = 0; j < nk; j++) {
                double ds = p[j] * (dp[j] - dot) * scale;
                for (int x = 0; x < d; x++) {
                    size_t kr = ((size_t)j * Hkv + kh) * d + x;
                    dq[((size_t)i * H + h) * d + x] += ds * k[kr];
                    dk[kr] += ds * qi[x];
                    dv[kr] += p[j] * gi[x];
                }
            }
        }
    free(p);
    free(dp);
}

static double *dcopy(const float *x, size_t n) {
    double *d = malloc((n + 1) * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* the backward over `blocks` key blocks with the whole attention's (o, lse) */
static void test_backward(int nq, int nk, int H, int Hkv, int d, int causal, int blocks) {
    size_t nqe = (size_t)nq * H * d, nke = (size_t)nk * Hkv * d;
    float *q = randf(nqe, -2, 2), *k = randf(nke, -1, 1), *v = randf(nke, -1, 1), *g = randf(nqe, -1, 1);
    int *qp = malloc((size_t)nq * sizeof(int)), *kp = malloc((size_t)nk * sizeof(int));
    for (int i = 0; i < nq; i++) qp[i] = (int)((long)i * nk / nq) + i % 3;
    for (int j = 0; j < nk; j++) kp[j] = j % 2 ? nk - 1 - j / 2 : j / 2;
    if (causal) qp[0] = -1;
    double *o64 = malloc(nqe * sizeof(double)), *l64 = malloc((size_t)nq * H * sizeof(double));
    attn64(o64, l64, q, k, v, qp, kp, nq, nk, H, Hkv, d, causal);
    float *o = malloc(nqe * sizeof(float)), *lse = malloc((size_t)nq * H * sizeof(float));
    for (size_t i = 0; i < nqe; i++) o[i] = (float)o64[i];
    for (int i = 0; i < nq * H; i++) lse[i] = (float)l64[i];
    float *dq = calloc(nqe + 1, sizeof(float)), *dk = calloc(nke + 1, sizeof(float)), *dv = calloc(nke + 1, sizeof(float));
    float sc = 1.0f / sqrtf((float)d);
    for (int b = 0; b < blocks; b++) {
        int j0 = (int)((long)b * nk / blocks), j1 = (int)((long)(b + 1) * nk / blocks);
        size_t at = (size_t)j0 * Hkv * d;
        kern_flash_block_backward(dq, dk + at, dv + at, q, k + at, v + at, o, lse, g, qp, kp + j0, nq, j1 - j0, H, Hkv,
                                  d, causal, sc, NULL);
    }
    pl_device_sync();
    double *dq64 = malloc(nqe * sizeof(double)), *dk64 = malloc(nke * sizeof(double)), *dv64 = malloc(nke * sizeof(double));
    double *q64 = dcopy(q, nqe), *k64 = dcopy(k, nke), *v64 = dcopy(v, nke), *g64 = dcopy(g, nqe);
    grad64(dq64, dk64, dv64, q64, k64, v64, g64, qp, kp, nq, nk, H, Hkv, d, causal);
    char what[200];
    const char *names[3] = {"dq", "dk", "dv"};
    const float *got[3] = {dq, dk, dv};
    const double *want[3] = {dq64, dk64, dv64};
    for (int t = 0; t < 3; t++) {
        snprintf(what, sizeof what, "flash backward: %d key blocks (%s, H %d, Hkv %d, d %d): %s", blocks,
                 causal ? "causal" : "full", H, Hkv, d, names[t]);
        check_rel(what, got[t], want[t], t ? nke : nqe, 1e-5);
    }
    /* the float64 gradient itself, against central differences of the loss in one element */
    double *o2 = malloc(nqe * sizeof(double)), h = 1e-6, lp = 0, lm = 0;
    size_t at = nke / 2;
    float keep = k[at];
    k[at] = keep + (float)h, attn64(o2, l64, q, k, v, qp, kp, nq, nk, H, Hkv, d, causal);
    for (size_t i = 0; i < nqe; i++) lp += o2[i] * g[i];
    k[at] = keep - (float)h, attn64(o2, l64, q, k, v, qp, kp, nq, nk, H, Hkv, d, causal);
    for (size_t i = 0; i < nqe; i++) lm += o2[i] * g[i];
    k[at] = keep;
    double fd = (lp - lm) / (((double)(keep + (float)h)) - ((double)(keep - (float)h)));
    snprintf(what, sizeof what, "flash backward: the float64 dk against central differences (%.6f vs %.6f)", dk64[at], fd);
    tap_check(fabs(fd - dk64[at]) <= 1e-4 * (1 + fabs(fd)), what);
    free(o2);
    free(q), free(k), free(v), free(g), free(qp), free(kp), free(o64), free(l64), free(o), free(lse), free(dq), free(dk),
        free(dv), free(dq64), free(dk64), free(dv64), free(q64), free(k64), free(v64), free(g64);
}

/* rows with lse in the hundreds, and both sides empty */
static void test_merge_extremes(void) {
    enum { R = 4, D = 3 };
    float o[R * D] = {1, 2, 3, 1, 1, 1, 0, 0, 0, 5, 5, 5}, ob[R * D] = {3, 2, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0};
    float lse[R] = {300, 250, -INFINITY, 40}, lb[R] = {300, 260, -INFINITY, -INFINITY};
    kern_flash_merge(o, lse, ob, lb, R, D, NULL);
    pl_device_sync();
    double w = 1 / (1 + exp(-10.0));
    bool ok = fabsf(o[0] - 2) < 1e-6f && fabsf(lse[0] - (300 + logf(2))) < 1e-4f && fabs(o[3] - (w * 2 + (1 - w))) < 1e-6 &&
              o[6] == 0 && lse[2] == -INFINITY && o[9] == 5 && lse[3] == 40;
    tap_check(ok, "flash_merge: lse 300 and 250/260 merged without overflow, an empty side changes nothing");
}

static void test_records(void) {
    int nq = 5, nk = 7, H = 4, Hkv = 2, d = 8;
    float *q = randf((size_t)nq * H * d, -1, 1), *k = randf((size_t)nk * Hkv * d, -1, 1), *v = randf((size_t)nk * Hkv * d, -1, 1);
    float *o = malloc((size_t)nq * H * d * sizeof(float)), *l = malloc((size_t)nq * H * sizeof(float));
    int qp[5] = {0, 1, 2, 3, 4}, kp[7] = {0, 1, 2, 3, 4, 5, 6};
    double by, fl;
    kern_flash_block(o, l, q, k, v, qp, kp, nq, nk, H, Hkv, d, 1, 0.5f, NULL);
    kern_flash_block_cost(nq, nk, H, Hkv, d, &by, &fl);
    check_record("flash_block", by, fl);
    tap_check(fl == (double)nq * nk * H * kern_flash_pair_flops(d), "flash_block: flops are pairs x kern_flash_pair_flops(d)");
    kern_flash_merge(o, l, o, l, nq * H, d, NULL);
    kern_flash_merge_cost(nq * H, d, &by, &fl);
    check_record("flash_merge", by, fl);
    float *dq = calloc((size_t)nq * H * d, sizeof(float)), *dk = calloc((size_t)nk * Hkv * d, sizeof(float)),
          *dv = calloc((size_t)nk * Hkv * d, sizeof(float));
    kern_flash_block_backward(dq, dk, dv, q, k, v, o, l, o, qp, kp, nq, nk, H, Hkv, d, 1, 0.5f, NULL);
    kern_flash_backward_cost(nq, nk, H, Hkv, d, &by, &fl);
    check_record("flash_block_bwd", by, fl);
    pl_device_sync();
    free(dq), free(dk), free(dv);
    pl_device_sync();
    free(q), free(k), free(v), free(o), free(l);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_blocks(9, 9, 2, 2, 4, 1, 1, false);
    test_blocks(9, 20, 4, 2, 8, 1, 3, false);
    test_blocks(12, 23, 6, 2, 16, 1, 4, true);
    test_blocks(7, 13, 4, 4, 8, 0, 5, true);
    test_blocks(6, 40, 2, 1, 40, 1, 7, false); /* d > 32: the CUDA lanes loop */
    test_backward(6, 6, 2, 2, 4, 1, 1);
    test_backward(9, 20, 4, 2, 8, 1, 3);
    test_backward(7, 13, 6, 3, 16, 0, 4);
    test_merge_extremes();
    test_records();
    return tap_finish();
}
