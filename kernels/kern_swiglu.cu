/* kern_swiglu.cu - SwiGLU (silu(gate) * up), CUDA version (same arguments as the
 * reference in kern_swiglu.c, device pointers). Bandwidth-bound: float4 loads when every
 * pointer is 16-byte aligned, a scalar loop otherwise. */
#include <stdint.h> // defines: uintptr_t (alignment checks)

#include "kern_swiglu.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* expf, not __expf: the fast intrinsic is off by a few ulp over the range an FFN sees,
 * and the kernel is bound by memory anyway. */
static __device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

static __global__ void swiglu_vec4_kernel(float4 *out, const float4 *gate, const float4 *up, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 g = gate[i], u = up[i];
        out[i] = make_float4(swiglu(g.x, u.x), swiglu(g.y, u.y), swiglu(g.z, u.z), swiglu(g.w, u.w));
    }
}

static __global__ void swiglu_scalar_kernel(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = swiglu(gate[i], up[i]);
}

static __global__ void swiglu_backward_kernel(float *dgate, float *dup, const float *dout, const float *gate,
                                              const float *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i], u = up[i], d = dout[i];
        float sg = 1.0f / (1.0f + expf(-g));
        dgate[i] = d * u * sg * (1.0f + g * (1.0f - sg));
        dup[i] = d * g * sg;
    }
}

/* ================================================================================== */
/* Launcher                                                                            */
/* ================================================================================== */

void kern_swiglu_forward_cuda(float *out, const float *gate, const float *up, size_t n,
                              pl_stream *s) {
    if (n == 0) return;
    const int threads = 256;
    if (n % 4 == 0 && (((uintptr_t)out | (uintptr_t)gate | (uintptr_t)up) & 15u) == 0) {
        swiglu_vec4_kernel<<<kern_blocks(n / 4, threads), threads, 0, kern_native(s)>>>(
            (float4 *)out, (const float4 *)gate, (const float4 *)up, n / 4);
    } else {
        swiglu_scalar_kernel<<<kern_blocks(n, threads), threads, 0, kern_native(s)>>>(out, gate, up, n);
    }
    PL_CUDA_KERNEL_CHECK();
}

void kern_swiglu_backward_cuda(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                               size_t n, pl_stream *s) {
    if (n == 0) return;
    swiglu_backward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(dgate, dup, dout, gate, up, n);
    PL_CUDA_KERNEL_CHECK();
}
