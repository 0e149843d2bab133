/* kern_gelu.cu - GELU (tanh approximation), CUDA version (same arguments as the reference
 * in kern_gelu.c, device pointers). */
#include "kern_gelu.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

static __global__ void gelu_forward_kernel(float *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = in[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x)));
    }
}

static __global__ void gelu_backward_kernel(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dy[i] * d;
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_gelu_forward_cuda(float *out, const float *in, size_t n, pl_stream *s) {
    if (n == 0) return;
    gelu_forward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(out, in, n);
    PL_CUDA_KERNEL_CHECK();
}

void kern_gelu_backward_cuda(float *dx, const float *dy, const float *x, size_t n, pl_stream *s) {
    if (n == 0) return;
    gelu_backward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(dx, dy, x, n);
    PL_CUDA_KERNEL_CHECK();
}
