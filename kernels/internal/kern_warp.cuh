/* kern_warp.cuh - small device helpers shared by the kernels/ CUDA files (internal). */
#ifndef KERN_WARP_CUH
#define KERN_WARP_CUH

#include <cuda_runtime.h> // defines: cudaStream_t, __shfl_xor_sync

#include "pl_device.h"     // defines: pl_stream_native
#include "pl_cuda_check.h" // defines: PL_CUDA_KERNEL_CHECK

static inline cudaStream_t kern_native(pl_stream *s) { return (cudaStream_t)pl_stream_native(s); }

static __device__ __forceinline__ float kern_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float kern_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Grid size for a grid-stride loop over n elements: enough blocks to fill the GPU, no
 * more than needed. */
static inline unsigned kern_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return b == 0 ? 1u : (unsigned)b;
}

#endif
