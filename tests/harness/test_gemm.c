/* pl_gemm against a naive triple loop in double, for every transpose, alpha/beta and
 * leading dimension (sub-views of wider buffers). */
#include <math.h>
#include <stdlib.h>

#include "tap.h"

static float at(const float *X, int ld, bool t, int i, int j) { return t ? X[j * ld + i] : X[i * ld + j]; }

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 64, 64}, {5, 9, 0}, {128, 3, 200}};
    float ab[][2] = {{1, 0}, {0.5f, 1}, {-2, 0.25f}};
    int all_ok = 1, cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (size_t a = 0; a < sizeof ab / sizeof ab[0]; a++)
                    for (int pad = 0; pad < 2; pad++) {
                        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
                        int lda = ac + 3 * pad, ldb = bc + 2 * pad, ldc = n + 5 * pad;
                        if (lda < 1) lda = 1;
                        if (ldb < 1) ldb = 1;
                        size_t na = (size_t)ar * lda + 1, nb = (size_t)br * ldb + 1, nc = (size_t)m * ldc;
                        float *hA = malloc(na * 4), *hB = malloc(nb * 4), *hC = malloc(nc * 4), *ref = malloc(nc * 4);
                        pl_rng_fill_host(hA, 1, (int64_t)na, (int64_t)na, 0, 0, 5, 1, PL_RNG_UNIFORM, -1, 1);
                        pl_rng_fill_host(hB, 1, (int64_t)nb, (int64_t)nb, 0, 0, 5, 2, PL_RNG_UNIFORM, -1, 1);
                        pl_rng_fill_host(hC, 1, (int64_t)nc, (int64_t)nc, 0, 0, 5, 3, PL_RNG_UNIFORM, -1, 1);
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) {
                                double acc = 0;
                                for (int p = 0; p < k; p++) acc += (double)at(hA, lda, ta, i, p) * at(hB, ldb, tb, p, j);
                                ref[i * ldc + j] = (float)(ab[a][0] * acc + ab[a][1] * (double)hC[i * ldc + j]);
                            }
                        float *dA = pl_malloc_floats(na), *dB = pl_malloc_floats(nb), *dC = pl_malloc_floats(nc);
                        pl_upload(dA, hA, na * 4);
                        pl_upload(dB, hB, nb * 4);
                        pl_upload(dC, hC, nc * 4);
                        pl_gemm(ta, tb, m, n, k, ab[a][0], dA, lda, dB, ldb, ab[a][1], dC, ldc, NULL);
                        pl_download(hC, dC, nc * 4);
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++)
                                if (fabs(hC[i * ldc + j] - ref[i * ldc + j]) > 1e-4 * (1 + k)) all_ok = 0;
                        cases++;
                        pl_free(dA); pl_free(dB); pl_free(dC);
                        free(hA); free(hB); free(hC); free(ref);
                    }
    char msg[96];
    snprintf(msg, sizeof msg, "pl_gemm matches a naive loop in %d cases (transposes, alpha/beta, strides)", cases);
    tap_check(all_ok, msg);
    pl_metrics m;
    pl_metrics_get(&m);
    tap_check(m.gemm_calls == (uint64_t)cases, "pl_gemm calls are counted");
    pl_metrics_reset();
    float *d = pl_malloc_floats(64 * 64 * 3);
    pl_gemm(false, false, 64, 32, 16, 1, d, 16, d + 4096, 32, 0, d + 8192, 32, NULL);
    pl_metrics_get(&m);
    tap_check(m.gemm_flops == 2.0 * 64 * 32 * 16, "pl_gemm flops are counted as 2mnk");
    pl_free(d);
    return tap_finish();
}
