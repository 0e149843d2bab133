/* kern_residual.cu - residual add, CUDA version. Purely bandwidth-bound: float4 loads
 * when every pointer is 16-byte aligned, a scalar loop otherwise. */
#include "kern_residual.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

#include <stdint.h>

static __global__ void residual_forward_vec4(float4 *out, const float4 *a, const float4 *b,
                                             size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i];
        out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

static __global__ void residual_forward_scalar(float *out, const float *a, const float *b,
                                               size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

static __global__ void residual_backward_kernel(float *da, float *db, const float *dout,
                                                size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = dout[i];
        da[i] += g;
        db[i] += g;
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

void kern_residual_forward_cuda(float *out, const float *a, const float *b, size_t n,
                                pl_stream *s) {
    if (n == 0) return;
    const int threads = 256;
    if (n % 4 == 0 && aligned16(out) && aligned16(a) && aligned16(b)) {
        residual_forward_vec4<<<kern_blocks(n / 4, threads), threads, 0, kern_native(s)>>>(
            (float4 *)out, (const float4 *)a, (const float4 *)b, n / 4);
        PL_CUDA_KERNEL_CHECK();
        return;
    }
    residual_forward_scalar<<<kern_blocks(n, threads), threads, 0, kern_native(s)>>>(out, a, b, n);
    PL_CUDA_KERNEL_CHECK();
}

void kern_residual_backward_cuda(float *da, float *db, const float *dout, size_t n,
                                 pl_stream *s) {
    if (n == 0) return;
    const int threads = 256;
    residual_backward_kernel<<<kern_blocks(n, threads), threads, 0, kern_native(s)>>>(da, db, dout, n);
    PL_CUDA_KERNEL_CHECK();
}
