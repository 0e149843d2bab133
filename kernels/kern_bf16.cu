/* kern_bf16.cu - float32 <-> bfloat16 conversion, CUDA version: the integer rule of
 * pl_bf16_from_float (not __float2bfloat16_rn), so both devices give the same words for every
 * input, NaN payloads included. */
#include "kern_bf16.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

static __device__ __forceinline__ uint16_t round_bf16(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static __global__ void from_f32_kernel(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = round_bf16(src[i]);
}

static __global__ void to_f32_kernel(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

void kern_bf16_from_f32_cuda(uint16_t *dst, const float *src, size_t n, pl_stream *s) {
    if (n == 0) return;
    from_f32_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(dst, src, n);
    PL_CUDA_KERNEL_CHECK();
}

void kern_bf16_to_f32_cuda(float *dst, const uint16_t *src, size_t n, pl_stream *s) {
    if (n == 0) return;
    to_f32_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(dst, src, n);
    PL_CUDA_KERNEL_CHECK();
}
