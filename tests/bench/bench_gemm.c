/* bench_gemm: pl_gemm against a raw cblas_sgemm of the same shape, interleaved. Prints
 * one `ratio` line per shape: raw time / pl_gemm time. cpu device, one BLAS thread. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "pl.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CPU) pl_usage_error("bench_gemm compares with raw OpenBLAS on the cpu device only");
    int shapes[2][3] = {{1024, 1024, 1024}, {4096, 4096, 1024}};
    for (int s = 0; s < 2; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *A = pl_malloc_floats((size_t)m * k), *B = pl_malloc_floats((size_t)k * n), *C = pl_malloc_floats((size_t)m * n);
        pl_fill(A, 0.5f, (size_t)m * k, NULL);
        pl_fill(B, 0.25f, (size_t)k * n, NULL);
        int iters = s == 0 ? 7 : 3;
        double th[8], tr[8];
        for (int i = -1; i < iters; i++) {
            double t0 = pl_now();
            pl_gemm(false, false, m, n, k, 1, A, k, B, n, 0, C, n, NULL);
            pl_device_sync();
            double t1 = pl_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, A, k, B, n, 0, C, n);
            double t2 = pl_now();
            if (i >= 0) { th[i] = t1 - t0; tr[i] = t2 - t1; }
        }
        qsort(th, (size_t)iters, sizeof(double), cmp);
        qsort(tr, (size_t)iters, sizeof(double), cmp);
        double mh = th[iters / 2], mr = tr[iters / 2];
        printf("ratio gemm %dx%dx%d: raw sgemm / pl_gemm        %6.3f   (pl_gemm %.1f ms = %.1f GFLOP/s, raw %.1f ms, target >= 0.95)\n",
               m, n, k, mr / mh, mh * 1e3, 2.0 * m * n * k / mh / 1e9, mr * 1e3);
        pl_free(A); pl_free(B); pl_free(C);
    }
    pl_finalize();
    return 0;
}
