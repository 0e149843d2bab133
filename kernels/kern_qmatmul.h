/* kern_qmatmul.h - products with weights kept in GGUF's quantised blocks, forward only:
 *
 *   y[t, r] = sum_j x[t, j] W[r, j]     (y = x W^T, W [rows, cols] row-major, as nn.Linear)
 *   out[i, :] = W[idx[i], :]            (kern_qget_rows: the embedding lookup)
 *
 * W stays in its blocks of KERN_QK = 32 weights along a row (docs/gguf.md draws them):
 *   Q8_0  34 bytes: fp16 d, 32 int8 q            w = q d
 *   Q4_0  18 bytes: fp16 d, 16 bytes of nibbles  w = (q - 8) d   (weight j: low nibble of
 *                                                 byte j, weight j + 16: its high nibble)
 *   Q4_1  20 bytes: fp16 d, fp16 m, 16 bytes     w = q d + m
 * and is dequantised inside the dot product, never written out: a decode step reads 4.5 to
 * 8.5 bits per weight instead of 32.
 *
 * x stays float32. For one token the kernels form, per block b of row r, S = sum_j q_j x_j
 * in float and add d_b S (+ m_b X_b for Q4_1, X_b the block's sum of x) to the row's sum;
 * for several tokens the vectorised CPU version unpacks a row once into its dequantised
 * weights (the same floats as the reference's) and reuses them for every token. In exact
 * arithmetic both ARE the product with the dequantised weights; in float they differ from
 * any float32 evaluation of it only by rounding: with u = 2^-24 and k = cols + 2,
 *
 *   |y - x.w| <= gamma_k * sum_j (|d q_j| + |m|) |x_j|,   gamma_k = k u / (1 - k u)
 *
 * (q_j the integer of weight j, m = 0 outside Q4_1; for Q8_0 and Q4_0, d q_j is exactly the
 * dequantised weight, so the right side is gamma_k sum |w_j x_j|). tests/kernels/
 * test_kernels_quant.c checks every element against it. Keeping x in float32 is what makes
 * this bound hold; llama.cpp instead rounds x to 8 bits per block and multiplies integers,
 * which is faster and is not the dequantised product (docs/kernels.md weighs the two).
 *
 * Three entry points per function, as in every kernels/ family, plus a vectorised CPU one:
 * _ref (plain scalar loops, the reference), _cpu (the same sums vectorised with GCC vector
 * types, what the dispatcher runs on the cpu device), _cuda, and the dispatcher.
 */
#ifndef KERN_QMATMUL_H
#define KERN_QMATMUL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> // defines: memcpy (kern_half_to_float)

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* ggml's numbering (what a GGUF file stores in a tensor's type). */
enum { KERN_Q4_0 = 2, KERN_Q4_1 = 3, KERN_Q8_0 = 8 };
#define KERN_QK 32 /* weights per block */

/* Bytes of one block (18, 20, 34), or 0 for a type the kernels do not take. */
size_t kern_q_block_bytes(int type);
/* Bytes of a row of cols weights (cols a multiple of KERN_QK). */
size_t kern_q_row_bytes(int type, int64_t cols);

/* Refuses (a fatal error) a type the kernels do not take, or cols not a multiple of 32. */
void kern_q_check_args(int type, int cols);

/* IEEE binary16 -> binary32, exact for every half: the exponent and mantissa shifted into
 * float's places, then a multiplication by 2^112 moves the exponent bias from 15 to 127 (and
 * turns a half subnormal into the float it is); infinities and NaNs are rebuilt. */
static inline float kern_half_to_float(const uint8_t *p) {
    uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8, sign = (h & 0x8000u) << 16, em = h & 0x7fffu, bits;
    float f;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | (em & 0x3ffu) << 13;
        memcpy(&f, &bits, 4);
        return f;
    }
    bits = em << 13;
    memcpy(&f, &bits, 4);
    f *= 0x1p112f;
    memcpy(&bits, &f, 4);
    bits |= sign;
    memcpy(&f, &bits, 4);
    return f;
}

/* y rows t < n: columns [0, rows) of a row of ldy floats; x rows: cols floats of a row of
 * ldx. cols must be a multiple of KERN_QK. W is device memory, rows of kern_q_row_bytes
 * each, no alignment needed. y must not overlap x. */
void kern_qmatmul_forward(float *y,       /* [n, ldy]                  */
                          int ldy,
                          const float *x, /* [n, ldx]                  */
                          int ldx,
                          const void *W,  /* [rows, cols] in blocks    */
                          int type, int n, int rows, int cols, pl_stream *s);
/* idx a device array of n row numbers in [0, rows of W). */
void kern_qget_rows(float *out,    /* [n, C]                      */
                    const void *W, /* [rows, C] in blocks         */
                    int type, const int *idx, int n, int C, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count them
 * (docs/cost-model.md, "Kernels"): the weights at their stored size. */
void kern_qmatmul_cost(int type, int n, int rows, int cols, double *bytes, double *flops);
void kern_qget_rows_cost(int type, int n, int C, double *bytes, double *flops);

void kern_qmatmul_forward_ref(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                              int cols);
void kern_qmatmul_forward_cpu(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                              int cols);
void kern_qget_rows_ref(float *out, const void *W, int type, const int *idx, int n, int C);
#ifdef PL_HAVE_CUDA
void kern_qmatmul_forward_cuda(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                               int cols, pl_stream *s);
void kern_qget_rows_cuda(float *out, const void *W, int type, const int *idx, int n, int C, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
