/* kern_gather.cu - row gather, CUDA version (same arguments as the reference in
 * kern_gather.c, device pointers). */
#include "kern_gather.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* A thread per output element; consecutive threads copy consecutive floats of a row. */
static __global__ void gather_rows_kernel(float *out, const float *src, const int *idx, int n, int C) {
    size_t total = (size_t)n * C;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / C, c = k % C;
        out[k] = src[(size_t)idx[i] * C + c];
    }
}

void kern_gather_rows_cuda(float *out, const float *src, const int *idx, int n, int C, pl_stream *s) {
    size_t total = (size_t)n * C;
    if (total == 0) return;
    gather_rows_kernel<<<kern_blocks(total, 256), 256, 0, kern_native(s)>>>(out, src, idx, n, C);
    PL_CUDA_KERNEL_CHECK();
}
