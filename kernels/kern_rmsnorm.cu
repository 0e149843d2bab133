/* kern_rmsnorm.cu - RMS normalisation, CUDA version (same arguments as the reference in
 * kern_rmsnorm.c, device pointers). */
#include "kern_rmsnorm.h"
#include "kern_warp.cuh" // defines: kern_native, kern_warp_sum, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* One warp per row. The second pass reads the row again, from L1/L2 at llama widths
 * (C = 576 .. 8192 is 2 .. 32 KiB), so DRAM sees about one read and one write per
 * element. Each lane rescales exactly the elements it summed, so out may equal inp. */
static __global__ void rmsnorm_forward_kernel(float *out, const float *inp, const float *weight,
                                              int N, int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) ss += x[c] * x[c];
    float r = rsqrtf(kern_warp_sum(ss) / (float)C + eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = x[c] * r * weight[c];
}

/* ================================================================================== */
/* Launcher                                                                            */
/* ================================================================================== */

void kern_rmsnorm_forward_cuda(float *out, const float *inp, const float *weight, int N, int C,
                               float eps, pl_stream *s) {
    if (N <= 0 || C <= 0) return;
    const int warps = 8;
    rmsnorm_forward_kernel<<<(N + warps - 1) / warps, warps * 32, 0, kern_native(s)>>>(out, inp, weight,
                                                                                       N, C, eps);
    PL_CUDA_KERNEL_CHECK();
}
