/* pl_device_cpu.c - the cpu device backend: host memory, plain loops, OpenBLAS. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"

static void cpu_init(pl_runtime_info *info) {
    info->cuda_device = -1;
    /* Ranks share cores: one BLAS thread each unless the user asked for more. */
    openblas_set_num_threads(info->blas_threads);
}

static void *cpu_malloc(size_t bytes) {
    /* 64-byte alignment for vector loads, and exactly the size asked for, so that an
     * AddressSanitizer build sees a write one element past the end (malloc(0) may return
     * NULL: one byte gives a distinct, freeable pointer). */
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
}

static void cpu_free(void *p) { free(p); }
static void cpu_move(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }

static void cpu_copy(void *dst, const void *src, size_t bytes, pl_stream *s) {
    (void)s;
    memmove(dst, src, bytes);
}

static void cpu_memset(void *p, int byte, size_t bytes, pl_stream *s) {
    (void)s;
    memset(p, byte, bytes);
}

static void cpu_fill(float *p, float v, size_t n, pl_stream *s) {
    (void)s;
    for (size_t i = 0; i < n; i++) p[i] = v;
}

static void cpu_reduce_local(float *dst, const float *src, size_t n, pl_op op, pl_stream *s) {
    (void)s;
    if (op == PL_MAX) {
        for (size_t i = 0; i < n; i++) dst[i] = src[i] > dst[i] ? src[i] : dst[i];
    } else {
        for (size_t i = 0; i < n; i++) dst[i] += src[i];
    }
}

static void cpu_scale(float *p, float alpha, size_t n, pl_stream *s) {
    (void)s;
    for (size_t i = 0; i < n; i++) p[i] *= alpha;
}

static void cpu_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc, pl_stream *s) {
    (void)s;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

const pl_device_backend pl_device_cpu = {
    .name = "cpu",
    .init = cpu_init,
    .malloc = cpu_malloc,
    .free = cpu_free,
    .upload = cpu_move,
    .download = cpu_move,
    .copy = cpu_copy,
    .memset = cpu_memset,
    .fill = cpu_fill,
    .reduce_local = cpu_reduce_local,
    .scale = cpu_scale,
    .gemm = cpu_gemm,
    /* streams and events: bookkeeping in pl_device.c is all the cpu needs */
};
