/* kern_layernorm.cu - layer normalisation, CUDA version (same arguments as the reference
 * in kern_layernorm.c, device pointers). */
#include "kern_layernorm.h"
#include "kern_warp.cuh" // defines: kern_native, kern_warp_sum, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* One warp per row: the row is read three times from L1/L2, written once. */
static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *inp, const float *weight,
                                                const float *bias, int N, int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += x[c];
    float m = kern_warp_sum(sum) / (float)C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) var += (x[c] - m) * (x[c] - m);
    float r = rsqrtf(kern_warp_sum(var) / (float)C + eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

static __global__ void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                             const float *weight, const float *mean,
                                             const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    float m = mean[row], r = rstd[row], g_sum = 0.0f, gx_sum = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = dy[c] * weight[c];
        g_sum += g;
        gx_sum += g * (x[c] - m) * r;
    }
    float g_mean = kern_warp_sum(g_sum) / (float)C, gx_mean = kern_warp_sum(gx_sum) / (float)C;
    float *dx = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (x[c] - m) * r;
        dx[c] = r * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
    }
}

/* dweight/dbias: a block owns 32 columns (coalesced reads across threadIdx.x) and its
 * threadIdx.y stripes split the rows; a shared-memory sum finishes, so the result is
 * deterministic (no atomics). */
#define LN_COLS 32
#define LN_STRIPES 16
static __global__ void layernorm_dparams_kernel(float *dweight, float *dbias, const float *dout,
                                                const float *inp, const float *mean,
                                                const float *rstd, int N, int C) {
    __shared__ float sw[LN_STRIPES][LN_COLS], sb[LN_STRIPES][LN_COLS];
    int c = blockIdx.x * LN_COLS + threadIdx.x;
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int i = threadIdx.y; i < N; i += LN_STRIPES) {
            float dy = dout[(size_t)i * C + c];
            aw += dy * (inp[(size_t)i * C + c] - mean[i]) * rstd[i];
            ab += dy;
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int k = 1; k < LN_STRIPES; k++) {
            aw += sw[k][threadIdx.x];
            ab += sb[k][threadIdx.x];
        }
        dweight[c] += aw;
        dbias[c] += ab;
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                 const float *weight, const float *bias, int N, int C,
                                 float eps, pl_stream *s) {
    if (N <= 0 || C <= 0) return;
    const int warps = 8;
    layernorm_forward_kernel<<<(N + warps - 1) / warps, warps * 32, 0, kern_native(s)>>>(
        out, mean, rstd, inp, weight, bias, N, C, eps);
    PL_CUDA_KERNEL_CHECK();
}

void kern_layernorm_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, const float *mean,
                                  const float *rstd, int N, int C, pl_stream *s) {
    if (N <= 0 || C <= 0) return;
    const int warps = 8;
    layernorm_dinp_kernel<<<(N + warps - 1) / warps, warps * 32, 0, kern_native(s)>>>(
        dinp, dout, inp, weight, mean, rstd, N, C);
    PL_CUDA_KERNEL_CHECK();
    dim3 block(LN_COLS, LN_STRIPES);
    layernorm_dparams_kernel<<<(C + LN_COLS - 1) / LN_COLS, block, 0, kern_native(s)>>>(
        dweight, dbias, dout, inp, mean, rstd, N, C);
    PL_CUDA_KERNEL_CHECK();
}
