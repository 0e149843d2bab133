// expect: wrong backward.nosp
/* Broken on purpose: the backward writes the weight gradients (GEMM beta = 0: "the caller
 * zeroes them anyway") instead of adding to them. Right for one backward from zero
 * gradients; a second micro-batch, or gradients that were not zero, are lost. */
#include "pl.h"
static void broken_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                        int ldb, float beta, float *c, int ldc, pl_stream *s) {
    (void)beta;
    pl_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f /* the bug */, c, ldc, s);
}
#define pl_gemm broken_gemm
#include "../../../solutions/03-megatron/megatron.c"
