/* kern_softmax.cu - causal softmax, CUDA version: one warp per row, online max/sum in one
 * read pass, one write pass (masked tail written as zeros). */
#include "kern_softmax.h"
#include "kern_warp.cuh" // defines: kern_native, kern_warp_sum, kern_warp_max, PL_CUDA_KERNEL_CHECK

#include <math.h>

static __global__ void softmax_forward_kernel(float *probs, const float *scores, long rows,
                                              int T, float scale) {
    long row = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = (int)(row % T);
    const float *x = scores + row * T;
    float *p = probs + row * T;
    /* online softmax: each lane keeps its running max and the sum rescaled to it */
    float mx = -INFINITY, sum = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        float v = scale * x[j];
        if (v > mx) {
            sum *= expf(mx - v);
            mx = v;
        }
        sum += expf(v - mx);
    }
    float gmx = kern_warp_max(mx);
    sum = kern_warp_sum(mx == -INFINITY ? 0.0f : sum * expf(mx - gmx));
    float inv = 1.0f / sum;
    for (int j = lane; j < T; j += 32) p[j] = j <= t ? expf(scale * x[j] - gmx) * inv : 0.0f;
}

static __global__ void softmax_backward_kernel(float *dscores, const float *dprobs,
                                               const float *probs, long rows, int T,
                                               float scale) {
    long row = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = (int)(row % T);
    const float *p = probs + row * T, *dp = dprobs + row * T;
    float *ds = dscores + row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += p[j] * dp[j];
    dot = kern_warp_sum(dot);
    for (int j = lane; j < T; j += 32) ds[j] = j <= t ? scale * p[j] * (dp[j] - dot) : 0.0f;
}

void kern_softmax_forward_cuda(float *probs, const float *scores, int R, int T, float scale,
                               pl_stream *s) {
    long rows = (long)R * T;
    if (rows <= 0) return;
    const int warps = 8;
    softmax_forward_kernel<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, kern_native(s)>>>(
        probs, scores, rows, T, scale);
    PL_CUDA_KERNEL_CHECK();
}

void kern_softmax_backward_cuda(float *dscores, const float *dprobs, const float *probs, int R,
                                int T, float scale, pl_stream *s) {
    long rows = (long)R * T;
    if (rows <= 0) return;
    const int warps = 8;
    softmax_backward_kernel<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, kern_native(s)>>>(
        dscores, dprobs, probs, rows, T, scale);
    PL_CUDA_KERNEL_CHECK();
}
