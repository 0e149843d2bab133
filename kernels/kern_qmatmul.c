/* kern_qmatmul.c - products with quantised weights (kern_qmatmul.h): the scalar reference
 * and the dispatchers. The vectorised CPU version is kern_qmatmul_cpu.c (its own flags). */
#include "kern_qmatmul.h"

#include <stdlib.h>
#include <string.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)
#include "pl_runtime.h"    // defines: PL_CHECK

/* ================================================================================== */
/* Blocks                                                                              */
/* ================================================================================== */

size_t kern_q_block_bytes(int type) {
    switch (type) {
    case KERN_Q4_0: return 18;
    case KERN_Q4_1: return 20;
    case KERN_Q8_0: return 34;
    default: return 0;
    }
}

size_t kern_q_row_bytes(int type, int64_t cols) { return kern_q_block_bytes(type) * (size_t)(cols / KERN_QK); }

void kern_q_check_args(int type, int cols) {
    PL_CHECK(kern_q_block_bytes(type) > 0, "kern_qmatmul: a weight type other than Q4_0, Q4_1, Q8_0");
    PL_CHECK(cols % KERN_QK == 0, "kern_qmatmul: a row that is not a whole number of 32-weight blocks");
}

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

/* Block b's 32 weights dequantised as datasets/ds_gguf.c does, bit for bit. */
static void dequant_block(const uint8_t *blk, int type, float *w) {
    float d = kern_half_to_float(blk);
    for (int j = 0; j < KERN_QK / 2 && type == KERN_Q4_0; j++) {
        w[j] = (float)((blk[2 + j] & 15) - 8) * d;
        w[j + KERN_QK / 2] = (float)((blk[2 + j] >> 4) - 8) * d;
    }
    for (int j = 0; j < KERN_QK / 2 && type == KERN_Q4_1; j++) {
        float m = kern_half_to_float(blk + 2);
        w[j] = (float)(blk[4 + j] & 15) * d + m;
        w[j + KERN_QK / 2] = (float)(blk[4 + j] >> 4) * d + m;
    }
    for (int j = 0; j < KERN_QK && type == KERN_Q8_0; j++) w[j] = (float)(int8_t)blk[2 + j] * d;
}

/* The definition: dequantise a block, multiply, add in order. */
void kern_qmatmul_forward_ref(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                              int cols) {
    kern_q_check_args(type, cols);
    size_t bb = kern_q_block_bytes(type), rb = kern_q_row_bytes(type, cols);
    float w[KERN_QK];
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            const uint8_t *row = (const uint8_t *)W + (size_t)r * rb;
            const float *xt = x + (size_t)t * ldx;
            float sum = 0.0f;
            for (int b = 0; b < cols / KERN_QK; b++) {
                dequant_block(row + (size_t)b * bb, type, w);
                for (int j = 0; j < KERN_QK; j++) sum += w[j] * xt[b * KERN_QK + j];
            }
            y[(size_t)t * ldy + r] = sum;
        }
}

void kern_qget_rows_ref(float *out, const void *W, int type, const int *idx, int n, int C) {
    kern_q_check_args(type, C);
    size_t bb = kern_q_block_bytes(type), rb = kern_q_row_bytes(type, C);
    for (int i = 0; i < n; i++)
        for (int b = 0; b < C / KERN_QK; b++)
            dequant_block((const uint8_t *)W + (size_t)idx[i] * rb + (size_t)b * bb, type,
                          out + (size_t)i * C + (size_t)b * KERN_QK);
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_qmatmul_cost(int type, int n, int rows, int cols, double *bytes, double *flops) {
    /* the weights once at their stored size, x read, y written; a multiply-add per weight
     * and token (the unpacking is not counted: it is not arithmetic on the data) */
    *bytes = (double)rows * (double)kern_q_row_bytes(type, cols) + 4.0 * n * ((double)cols + rows);
    *flops = 2.0 * n * (double)rows * cols;
}

void kern_qget_rows_cost(int type, int n, int C, double *bytes, double *flops) {
    /* an index and a stored row read, a float row written; a multiply (and add) per weight */
    *bytes = ((double)kern_q_row_bytes(type, C) + 4.0 * C + 4.0) * n;
    *flops = (type == KERN_Q4_1 ? 2.0 : 1.0) * n * (double)C;
}

/* what a deferred stream keeps of each CPU reference's arguments (kern_dispatch.h) */
KERN_THUNK(kern_qmatmul_forward_cpu, kern_qmatmul_forward_cpu, float *, int, const float *, int, const void *, int, int, int, int)
KERN_THUNK(kern_qget_rows_ref, kern_qget_rows_ref, float *, const void *, int, const int *, int, int)

void kern_qmatmul_forward(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                          int cols, pl_stream *s) {
    double bytes, flops;
    kern_qmatmul_cost(type, n, rows, cols, &bytes, &flops);
    KERN_DISPATCH("qmatmul", bytes, flops, kern_qmatmul_forward_cuda(y, ldy, x, ldx, W, type, n, rows, cols, s),
                  kern_qmatmul_forward_cpu, y, ldy, x, ldx, W, type, n, rows, cols);
}

void kern_qget_rows(float *out, const void *W, int type, const int *idx, int n, int C, pl_stream *s) {
    double bytes, flops;
    kern_qget_rows_cost(type, n, C, &bytes, &flops);
    KERN_DISPATCH("qget_rows", bytes, flops, kern_qget_rows_cuda(out, W, type, idx, n, C, s),
                  kern_qget_rows_ref, out, W, type, idx, n, C);
}
