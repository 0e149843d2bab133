/* kern_bias.cu - bias add and bias gradient, CUDA version (same arguments as the
 * reference in kern_bias.c, device pointers). */
#include "kern_bias.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

static __global__ void bias_forward_kernel(float *y, const float *bias, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % (size_t)cols];
}

/* One thread per column, consecutive threads on consecutive columns: each row is read
 * coalesced, and the sum over rows runs in the same order as the reference. */
static __global__ void bias_backward_kernel(float *dbias, const float *dy, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.0f;
    for (int r = 0; r < rows; r++) acc += dy[(size_t)r * cols + c];
    dbias[c] += acc;
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_bias_forward_cuda(float *y, const float *bias, int rows, int cols, pl_stream *s) {
    size_t n = (size_t)rows * cols;
    if (n == 0) return;
    bias_forward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(y, bias, rows, cols);
    PL_CUDA_KERNEL_CHECK();
}

void kern_bias_backward_cuda(float *dbias, const float *dy, int rows, int cols, pl_stream *s) {
    if (cols <= 0 || rows <= 0) return;
    bias_backward_kernel<<<(cols + 127) / 128, 128, 0, kern_native(s)>>>(dbias, dy, rows, cols);
    PL_CUDA_KERNEL_CHECK();
}
