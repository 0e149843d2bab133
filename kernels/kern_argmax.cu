/* kern_argmax.cu - row-wise argmax, CUDA version (same arguments as the reference in
 * kern_argmax.c, device pointers). */
#include "kern_argmax.h"
#include "kern_warp.cuh" // defines: kern_native, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernel                                                                              */
/* ================================================================================== */

/* A candidate is (value, index), index -1 for "no number seen". The better of two: a
 * real one over none, then the larger value, then the lower index - the order in which
 * candidates are combined does not change the winner, so ties go to the lowest index as
 * in the reference. */
static __device__ __forceinline__ void argmax_take(float &v, int &i, float v2, int i2) {
    if (i2 < 0) return;
    if (i < 0 || v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

#define ARGMAX_THREADS 256

/* One block per row: strided scan per thread (lowest index first, so a thread's own ties
 * keep its first), then shuffles within each warp and shared memory across warps. */
static __global__ void argmax_kernel(int *idx, const float *x, int V) {
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    const float *r = x + (size_t)blockIdx.x * V;
    float v = 0.0f;
    int i = -1;
    for (int j = threadIdx.x; j < V; j += ARGMAX_THREADS) {
        float y = r[j];
        if (!isnan(y) && (i < 0 || y > v)) {
            v = y;
            i = j;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float v2 = __shfl_xor_sync(0xffffffffu, v, o);
        int i2 = __shfl_xor_sync(0xffffffffu, i, o);
        argmax_take(v, i, v2, i2);
    }
    int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ARGMAX_THREADS / 32; w++) argmax_take(v, i, sv[w], si[w]);
        idx[blockIdx.x] = i < 0 ? 0 : i;
    }
}

/* ================================================================================== */
/* Launcher                                                                            */
/* ================================================================================== */

void kern_argmax_cuda(int *idx, const float *x, int N, int V, pl_stream *s) {
    if (N <= 0) return;
    argmax_kernel<<<(unsigned)N, ARGMAX_THREADS, 0, kern_native(s)>>>(idx, x, V);
    PL_CUDA_KERNEL_CHECK();
}
