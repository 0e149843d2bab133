/* kern_rope.cu - rotary position embedding (adjacent pairs), CUDA version (same arguments
 * as the reference in kern_rope.c, device pointers). */
#include "kern_rope.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernel                                                                              */
/* ================================================================================== */

/* A thread per (token, pair): it computes the angle once, in double as the reference
 * does (in float the angle is off by ~1e-4 rad at position 2048), and rotates that pair
 * in every head. Neighbouring threads touch neighbouring pairs of a head: coalesced.
 * The double math is a few operations per (token, pair), not per element, so even a GPU
 * with slow doubles spends its time on the loads and stores. */
static __global__ void rope_forward_kernel(float *x, const int *pos, int n_tokens, int n_heads,
                                           int head_dim, double log2_theta) {
    int half = head_dim / 2;
    size_t n = (size_t)n_tokens * half;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(k / half), i = (int)(k % half);
        double a = (double)pos[t] * exp2(-2.0 * i / head_dim * log2_theta);
        double sd, cd;
        sincos(a, &sd, &cd);
        float c = (float)cd, s = (float)sd;
        float *p = x + (size_t)t * n_heads * head_dim + 2 * i;
        for (int h = 0; h < n_heads; h++, p += head_dim) {
            float x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
        }
    }
}

/* ================================================================================== */
/* Launcher                                                                            */
/* ================================================================================== */

void kern_rope_forward_cuda(float *x, const int *pos, int n_tokens, int n_heads, int head_dim,
                            float theta, pl_stream *s) {
    size_t n = (size_t)n_tokens * (head_dim / 2);
    if (n == 0 || n_heads <= 0) return;
    rope_forward_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(x, pos, n_tokens, n_heads,
                                                                        head_dim, log2((double)theta));
    PL_CUDA_KERNEL_CHECK();
}
