/* kern_optim.cu - SGD with momentum and AdamW, CUDA version (same arguments as the
 * reference in kern_optim.c, device pointers). */
#include <math.h>

#include "kern_optim.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

static __global__ void sgd_kernel(float *param, float *mom, const float *grad, size_t n, float lr,
                                  float momentum, float weight_decay) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] + weight_decay * param[i];
        float mo = momentum * mom[i] + g;
        mom[i] = mo;
        param[i] -= lr * mo;
    }
}

static __global__ void adamw_kernel(float *param, float *m, float *v, const float *grad, size_t n,
                                    float lr, float beta1, float beta2, float eps,
                                    float weight_decay, float c1, float c2) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = param[i] - lr * weight_decay * param[i];
        param[i] = p - lr * (mi / c1) / (sqrtf(vi / c2) + eps);
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_optim_sgd_cuda(float *param, float *mom, const float *grad, size_t n, float lr,
                         float momentum, float weight_decay, pl_stream *s) {
    if (n == 0) return;
    sgd_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(param, mom, grad, n, lr, momentum,
                                                                weight_decay);
    PL_CUDA_KERNEL_CHECK();
}

void kern_optim_adamw_cuda(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int t,
                           pl_stream *s) {
    if (n == 0) return;
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    adamw_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(param, m, v, grad, n, lr, beta1,
                                                                  beta2, eps, weight_decay, c1, c2);
    PL_CUDA_KERNEL_CHECK();
}
