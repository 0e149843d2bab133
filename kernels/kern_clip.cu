/* kern_clip.cu - global-norm clipping and the clipped AdamW step, CUDA version (same
 * arguments as the reference in kern_clip.c, device pointers). The sum of squares runs in
 * one block with double accumulators, so it is deterministic (no atomics) and as exact as
 * the reference's loop up to the order of the additions. */
#include <math.h>

#include "kern_clip.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

enum { SUMSQ_THREADS = 512 };

template <typename T> static __device__ __forceinline__ double widen(T x);
template <> __device__ __forceinline__ double widen<float>(float x) { return (double)x; }
template <> __device__ __forceinline__ double widen<uint16_t>(uint16_t x) {
    return (double)__uint_as_float((uint32_t)x << 16);
}

template <typename T> static __global__ void sumsq_kernel(float *acc, const T *x, size_t n) {
    __shared__ double part[SUMSQ_THREADS];
    double s = 0.0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        double v = widen<T>(x[i]);
        s += v * v;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = SUMSQ_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) acc[0] = (float)((double)acc[0] + part[0]);
}

static __global__ void coef_kernel(float *coef, const float *sumsq, float max_norm) {
    double c = (double)max_norm / (sqrt((double)sumsq[0]) + KERN_CLIP_EPS);
    coef[0] = (float)(c < 1.0 ? c : 1.0);
}

static __device__ __forceinline__ float adamw_one(float p, float *m, float *v, float g, float lr, float beta1,
                                                  float beta2, float eps, float weight_decay, float c1, float c2) {
    float mi = beta1 * *m + (1.0f - beta1) * g;
    float vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi;
    *v = vi;
    p -= lr * weight_decay * p;
    return p - lr * (mi / c1) / (sqrtf(vi / c2) + eps);
}

static __global__ void adamw_kernel(float *param, float *m, float *v, const float *grad, const float *coef,
                                    size_t n, float lr, float beta1, float beta2, float eps, float wd, float c1,
                                    float c2) {
    float k = coef[0];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        param[i] = adamw_one(param[i], &m[i], &v[i], k * grad[i], lr, beta1, beta2, eps, wd, c1, c2);
}

static __device__ __forceinline__ uint16_t round_bf16(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static __global__ void adamw_bf16_kernel(float *master, float *m, float *v, const uint16_t *grad, const float *coef,
                                         uint16_t *out, size_t n, float lr, float beta1, float beta2, float eps,
                                         float wd, float c1, float c2) {
    float k = coef[0];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = k * __uint_as_float((uint32_t)grad[i] << 16);
        float p = adamw_one(master[i], &m[i], &v[i], g, lr, beta1, beta2, eps, wd, c1, c2);
        master[i] = p;
        out[i] = round_bf16(p);
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_clip_sumsq_cuda(float *acc, const float *x, size_t n, pl_stream *s) {
    sumsq_kernel<float><<<1, SUMSQ_THREADS, 0, kern_native(s)>>>(acc, x, n);
    PL_CUDA_KERNEL_CHECK();
}

void kern_clip_sumsq_bf16_cuda(float *acc, const uint16_t *x, size_t n, pl_stream *s) {
    sumsq_kernel<uint16_t><<<1, SUMSQ_THREADS, 0, kern_native(s)>>>(acc, x, n);
    PL_CUDA_KERNEL_CHECK();
}

void kern_clip_coef_cuda(float *coef, const float *sumsq, float max_norm, pl_stream *s) {
    coef_kernel<<<1, 1, 0, kern_native(s)>>>(coef, sumsq, max_norm);
    PL_CUDA_KERNEL_CHECK();
}

void kern_clip_adamw_cuda(float *param, float *m, float *v, const float *grad, const float *coef, size_t n,
                          float lr, float beta1, float beta2, float eps, float weight_decay, int t, pl_stream *s) {
    if (n == 0) return;
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    adamw_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(param, m, v, grad, coef, n, lr, beta1, beta2, eps,
                                                                  weight_decay, c1, c2);
    PL_CUDA_KERNEL_CHECK();
}

void kern_clip_adamw_bf16_cuda(float *master, float *m, float *v, const uint16_t *grad, const float *coef,
                               uint16_t *param_out, size_t n, float lr, float beta1, float beta2, float eps,
                               float weight_decay, int t, pl_stream *s) {
    if (n == 0) return;
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    adamw_bf16_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(master, m, v, grad, coef, param_out, n, lr,
                                                                       beta1, beta2, eps, weight_decay, c1, c2);
    PL_CUDA_KERNEL_CHECK();
}
