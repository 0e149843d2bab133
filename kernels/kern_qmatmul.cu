/* kern_qmatmul.cu - products with quantised weights, CUDA version (same arguments as the
 * reference in kern_qmatmul.c, device pointers).
 *
 * kern_qmatmul_forward: one warp per (row of W, group of up to 4 tokens). Each block of 32
 * weights is read by 4 consecutive lanes (8 weights each: Q8_0 bytes [8k, 8k + 8), Q4_*
 * bytes [4k, 4k + 4), whose low nibbles are weights 4k.. and high nibbles 16 + 4k..), so a
 * warp reads 8 consecutive blocks at a time: one contiguous, coalesced stretch of the row.
 * Each lane keeps its sums of q x (and of x, for Q4_1's m) per token, scales them by the
 * block's d, and the warp adds its lanes with shuffles. Decode (one token) reads every
 * weight once: the kernel is bound by the bytes of W, 4.5 to 8.5 bits per weight. */
#include <cuda_fp16.h> // defines: __half, __half2float

#include "kern_qmatmul.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, kern_warp_sum, PL_CUDA_KERNEL_CHECK

#define TOKENS_PER_WARP 4
#define WARPS_PER_BLOCK 4

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* fp16 at a 2-byte-aligned address (every block size is even). */
static __device__ __forceinline__ float ld_half(const uint8_t *p) {
    return __half2float(__ushort_as_half(*(const unsigned short *)p));
}

/* Lane part k (0..3) of block blk: its 8 integers into q, where they sit in the block into j. */
template <int TYPE>
static __device__ __forceinline__ void lane_part(const uint8_t *blk, int k, float q[8], int j[8]) {
    if (TYPE == KERN_Q8_0) {
        for (int i = 0; i < 8; i++) q[i] = (float)(int8_t)blk[2 + 8 * k + i], j[i] = 8 * k + i;
    } else {
        const uint8_t *qs = blk + (TYPE == KERN_Q4_1 ? 4 : 2);
        int off = TYPE == KERN_Q4_0 ? 8 : 0;
        for (int i = 0; i < 4; i++) {
            uint8_t b = qs[4 * k + i];
            q[i] = (float)((b & 15) - off), j[i] = 4 * k + i;
            q[4 + i] = (float)((b >> 4) - off), j[4 + i] = 16 + 4 * k + i;
        }
    }
}

template <int TYPE>
static __global__ void qmatmul_kernel(float *y, int ldy, const float *x, int ldx, const uint8_t *W, int n, int rows,
                                      int cols) {
    const int BB = TYPE == KERN_Q8_0 ? 34 : TYPE == KERN_Q4_1 ? 20 : 18;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int r = blockIdx.x * WARPS_PER_BLOCK + warp, t0 = blockIdx.y * TOKENS_PER_WARP;
    if (r >= rows) return; /* a whole warp leaves together */
    int nt = n - t0 < TOKENS_PER_WARP ? n - t0 : TOKENS_PER_WARP, nb = cols / KERN_QK;
    const uint8_t *row = W + (size_t)r * nb * BB;
    float acc[TOKENS_PER_WARP] = {0, 0, 0, 0};
    for (int b = lane / 4; b < nb; b += 8) {
        const uint8_t *blk = row + (size_t)b * BB;
        float q[8], d = ld_half(blk), m = TYPE == KERN_Q4_1 ? ld_half(blk + 2) : 0.0f;
        int j[8];
        lane_part<TYPE>(blk, lane % 4, q, j);
        for (int t = 0; t < TOKENS_PER_WARP; t++) {
            if (t >= nt) break;
            const float *xb = x + (size_t)(t0 + t) * ldx + (size_t)b * KERN_QK;
            float s = 0.0f, sx = 0.0f;
            for (int i = 0; i < 8; i++) {
                float xv = xb[j[i]];
                s = fmaf(q[i], xv, s);
                sx += xv;
            }
            acc[t] = fmaf(d, s, acc[t]);
            if (TYPE == KERN_Q4_1) acc[t] = fmaf(m, sx, acc[t]);
        }
    }
    for (int t = 0; t < TOKENS_PER_WARP; t++) {
        if (t >= nt) break;
        float v = kern_warp_sum(acc[t]);
        if (lane == 0) y[(size_t)(t0 + t) * ldy + r] = v;
    }
}

/* A thread per output element: one weight dequantised as the reference does. */
template <int TYPE>
static __global__ void qget_rows_kernel(float *out, const uint8_t *W, const int *idx, int n, int C) {
    const int BB = TYPE == KERN_Q8_0 ? 34 : TYPE == KERN_Q4_1 ? 20 : 18;
    size_t total = (size_t)n * C;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / C;
        int c = (int)(e % C), j = c % KERN_QK;
        const uint8_t *blk = W + (size_t)idx[i] * (C / KERN_QK) * BB + (size_t)(c / KERN_QK) * BB;
        float d = ld_half(blk), w;
        if (TYPE == KERN_Q8_0) {
            w = (float)(int8_t)blk[2 + j] * d;
        } else {
            const uint8_t *qs = blk + (TYPE == KERN_Q4_1 ? 4 : 2);
            int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
            w = TYPE == KERN_Q4_1 ? __fadd_rn(__fmul_rn((float)q, d), ld_half(blk + 2)) : __fmul_rn((float)(q - 8), d);
        }
        out[e] = w;
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_qmatmul_forward_cuda(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                               int cols, pl_stream *s) {
    kern_q_check_args(type, cols);
    if (n <= 0 || rows <= 0) return;
    dim3 grid((unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK),
              (unsigned)((n + TOKENS_PER_WARP - 1) / TOKENS_PER_WARP));
    const uint8_t *w = (const uint8_t *)W;
    cudaStream_t st = kern_native(s);
    switch (type) {
    case KERN_Q4_0: qmatmul_kernel<KERN_Q4_0><<<grid, 32 * WARPS_PER_BLOCK, 0, st>>>(y, ldy, x, ldx, w, n, rows, cols); break;
    case KERN_Q4_1: qmatmul_kernel<KERN_Q4_1><<<grid, 32 * WARPS_PER_BLOCK, 0, st>>>(y, ldy, x, ldx, w, n, rows, cols); break;
    default: qmatmul_kernel<KERN_Q8_0><<<grid, 32 * WARPS_PER_BLOCK, 0, st>>>(y, ldy, x, ldx, w, n, rows, cols); break;
    }
    PL_CUDA_KERNEL_CHECK();
}

void kern_qget_rows_cuda(float *out, const void *W, int type, const int *idx, int n, int C, pl_stream *s) {
    kern_q_check_args(type, C);
    size_t total = (size_t)n * C;
    if (total == 0) return;
    const uint8_t *w = (const uint8_t *)W;
    cudaStream_t st = kern_native(s);
    unsigned blocks = kern_blocks(total, 256);
    switch (type) {
    case KERN_Q4_0: qget_rows_kernel<KERN_Q4_0><<<blocks, 256, 0, st>>>(out, w, idx, n, C); break;
    case KERN_Q4_1: qget_rows_kernel<KERN_Q4_1><<<blocks, 256, 0, st>>>(out, w, idx, n, C); break;
    default: qget_rows_kernel<KERN_Q8_0><<<blocks, 256, 0, st>>>(out, w, idx, n, C); break;
    }
    PL_CUDA_KERNEL_CHECK();
}
