/* kern_xent.cu - softmax cross-entropy, CUDA version (same arguments as the reference in
 * kern_xent.c, device pointers). */
#include "kern_xent.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, kern_warp_sum, kern_warp_max

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* One warp per row: classes are few (10 for Fashion-MNIST), vocabularies fit a loop. */
static __global__ void xent_forward_kernel(float *losses, float *probs, const float *logits,
                                           const int *targets, int N, int V) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *z = logits + (size_t)row * V;
    float *p = probs + (size_t)row * V;
    float m = -INFINITY;
    for (int c = lane; c < V; c += 32) m = fmaxf(m, z[c]);
    m = kern_warp_max(m);
    float sum = 0.0f;
    for (int c = lane; c < V; c += 32) sum += expf(z[c] - m);
    sum = kern_warp_sum(sum);
    for (int c = lane; c < V; c += 32) p[c] = expf(z[c] - m) / sum;
    if (lane == 0) losses[row] = logf(sum) + m - z[targets[row]];
}

static __global__ void xent_backward_kernel(float *dlogits, const float *probs, const int *targets,
                                            int N, int V) {
    size_t n = (size_t)N * V;
    float inv = 1.0f / (float)N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / (size_t)V), c = (int)(i % (size_t)V);
        dlogits[i] = (probs[i] - (c == targets[r] ? 1.0f : 0.0f)) * inv;
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_xent_forward_cuda(float *losses, float *probs, const float *logits, const int *targets,
                            int N, int V, pl_stream *s) {
    if (N <= 0) return;
    const int rows_per_block = 4;
    xent_forward_kernel<<<(N + rows_per_block - 1) / rows_per_block, 32 * rows_per_block, 0,
                          kern_native(s)>>>(losses, probs, logits, targets, N, V);
    PL_CUDA_KERNEL_CHECK();
}

void kern_xent_backward_cuda(float *dlogits, const float *probs, const int *targets, int N, int V,
                             pl_stream *s) {
    size_t n = (size_t)N * V;
    if (n == 0) return;
    xent_backward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(dlogits, probs, targets, N, V);
    PL_CUDA_KERNEL_CHECK();
}
