/* kern_embedding.cu - token + position embedding, CUDA version. */
#include "kern_embedding.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

static __global__ void embedding_forward_kernel(float *out, const int *tokens, const float *wte,
                                                const float *wpe, int T, int B, int C, int t0) {
    size_t n = (size_t)T * B * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / C;
        int c = (int)(i % C), t = (int)(row / B);
        out[i] = wte[(size_t)tokens[row] * C + c] + wpe[(size_t)(t0 + t) * C + c];
    }
}

/* dwpe: a thread per (t, c) sums its B rows in order (deterministic); dwte: atomics, as
 * two rows may hold the same token. */
static __global__ void embedding_dwpe_kernel(float *dwpe, const float *dout, int T, int B, int C,
                                             int t0) {
    size_t n = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(i / C), c = (int)(i % C);
        float acc = 0.0f;
        for (int b = 0; b < B; b++) acc += dout[((size_t)t * B + b) * C + c];
        dwpe[(size_t)(t0 + t) * C + c] += acc;
    }
}

static __global__ void embedding_dwte_kernel(float *dwte, const float *dout, const int *tokens,
                                             int T, int B, int C) {
    size_t n = (size_t)T * B * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / C;
        atomicAdd(&dwte[(size_t)tokens[row] * C + i % C], dout[i]);
    }
}

void kern_embedding_forward_cuda(float *out, const int *tokens, const float *wte,
                                 const float *wpe, int T, int B, int C, int t0, pl_stream *s) {
    size_t n = (size_t)T * B * C;
    if (n == 0) return;
    embedding_forward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(out, tokens, wte, wpe,
                                                                           T, B, C, t0);
    PL_CUDA_KERNEL_CHECK();
}

void kern_embedding_backward_cuda(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                  int T, int B, int C, int t0, pl_stream *s) {
    size_t n = (size_t)T * B * C;
    if (n == 0) return;
    embedding_dwpe_kernel<<<kern_blocks((size_t)T * C, 256), 256, 0, kern_native(s)>>>(dwpe, dout, T,
                                                                                    B, C, t0);
    PL_CUDA_KERNEL_CHECK();
    embedding_dwte_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(dwte, dout, tokens, T,
                                                                        B, C);
    PL_CUDA_KERNEL_CHECK();
}
