/* bench_gpu: on a GPU, the harness against the raw libraries, interleaved in one run:
 *   pl_allreduce (nccl backend) vs ncclAllReduce on the same communicator and stream, at
 *   1 KiB, 1 MiB and 64 MiB (run it with one rank per GPU);
 *   pl_gemm vs cublasSgemm at 1024^3 and 4096x4096x1024.
 * Prints `ratio` lines: raw time / harness time. Built in the cuda flavour only; without a
 * usable GPU it says so and exits 0. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef PL_HAVE_NCCL
#include <nccl.h>
#endif

#include "pl.h"
#include "pl_backend.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp);
    return t[n / 2];
}

#define CK(x) do { if ((x) != 0) { fprintf(stderr, "bench_gpu: %s failed\n", #x); pl_abort(3); } } while (0)

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CUDA) {
        if (pl_rank() == 0) printf("# bench_gpu: no usable GPU (%s): skipped\n", pl_info()->device_why);
        pl_finalize();
        return 0;
    }
    cudaStream_t st = (cudaStream_t)pl_stream_compute()->native;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
#ifdef PL_HAVE_NCCL
    if (pl_info()->comm == PL_COMM_NCCL) {
        ncclComm_t nc = (ncclComm_t)pl_comm_world()->backend;
        size_t sizes[3] = {1024, 1 << 20, 64u << 20};
        for (int s = 0; s < 3; s++) {
            size_t n = sizes[s] / 4;
            float *a = pl_malloc_floats(n), *b = pl_malloc_floats(n);
            pl_fill(a, 1, n, NULL);
            int iters = s == 2 ? 20 : 200;
            double th[200], tr[200];
            for (int i = -5; i < iters; i++) {
                float ms_h, ms_r;
                CK(cudaEventRecord(e0, st));
                pl_allreduce(a, b, n, PL_SUM, pl_comm_world(), NULL);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms_h, e0, e1));
                CK(cudaEventRecord(e0, st));
                CK(ncclAllReduce(a, b, n, ncclFloat, ncclSum, nc, st));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms_r, e0, e1));
                if (i >= 0) { th[i] = ms_h; tr[i] = ms_r; }
            }
            double mh = median(th, iters), mr = median(tr, iters);
            if (pl_rank() == 0)
                printf("ratio allreduce %-8s raw ncclAllReduce / pl_allreduce  %6.3f   (%.1f us vs %.1f us, %d rank(s), target >= 0.97)\n",
                       s == 0 ? "1 KiB:" : s == 1 ? "1 MiB:" : "64 MiB:", mr / mh, mh * 1e3, mr * 1e3, pl_world());
            pl_free(a);
            pl_free(b);
        }
    }
#endif
    if (pl_rank() == 0) {
        cublasHandle_t h;
        CK(cublasCreate(&h));
        CK(cublasSetStream(h, st));
        int shapes[2][3] = {{1024, 1024, 1024}, {4096, 4096, 1024}};
        for (int s = 0; s < 2; s++) {
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            float *A = pl_malloc_floats((size_t)m * k), *B = pl_malloc_floats((size_t)k * n), *C = pl_malloc_floats((size_t)m * n);
            pl_fill(A, 0.5f, (size_t)m * k, NULL);
            pl_fill(B, 0.25f, (size_t)k * n, NULL);
            const float one = 1, zero = 0;
            double th[20], tr[20];
            for (int i = -3; i < 20; i++) {
                float ms_h, ms_r;
                CK(cudaEventRecord(e0, st));
                pl_gemm(false, false, m, n, k, 1, A, k, B, n, 0, C, n, NULL);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms_h, e0, e1));
                CK(cudaEventRecord(e0, st));
                /* row-major C = A B is column-major C^T = B^T A^T */
                CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k, &zero, C, n));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms_r, e0, e1));
                if (i >= 0) { th[i] = ms_h; tr[i] = ms_r; }
            }
            double mh = median(th, 20), mr = median(tr, 20);
            printf("ratio gemm %dx%dx%d: raw cublasSgemm / pl_gemm  %6.3f   (pl_gemm %.3f ms = %.1f TFLOP/s, target >= 0.95)\n",
                   m, n, k, mr / mh, mh, 2.0 * m * n * k / (mh * 1e-3) / 1e12);
            pl_free(A); pl_free(B); pl_free(C);
        }
        CK(cublasDestroy(h));
    }
    pl_finalize();
    return 0;
}
