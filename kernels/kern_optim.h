/* kern_optim.h - optimizer steps on a flat parameter array: SGD with momentum and
 * AdamW. Entry points as in every kernels/ family (see kern_gelu.h): dispatcher, _ref
 * (CPU reference), _cuda (CUDA builds only).
 */
#ifndef KERN_OPTIM_H
#define KERN_OPTIM_H

#include <stddef.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* SGD with momentum (PyTorch semantics, no dampening, no Nesterov):
 *   g' = grad + weight_decay * param;  mom = momentum * mom + g';  param -= lr * mom.
 * mom starts at zero, which equals PyTorch's "mom = g' on the first step". */
void kern_optim_sgd(float *param,      /* [n] updated in place */
                    float *mom,        /* [n] momentum buffer  */
                    const float *grad, /* [n]                  */
                    size_t n, float lr, float momentum, float weight_decay, pl_stream *s);
/* AdamW (decoupled weight decay), step t counts from 1:
 *   param -= lr * weight_decay * param;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   param -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). */
void kern_optim_adamw(float *param,      /* [n] updated in place  */
                      float *m,          /* [n] first moment      */
                      float *v,          /* [n] second moment     */
                      const float *grad, /* [n]                   */
                      size_t n, float lr, float beta1, float beta2, float eps,
                      float weight_decay, int t, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_optim_cost(size_t n, int adamw, double *bytes, double *flops);

void kern_optim_sgd_ref(float *param, float *mom, const float *grad, size_t n, float lr,
                        float momentum, float weight_decay);
void kern_optim_adamw_ref(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int t);
#ifdef PL_HAVE_CUDA
void kern_optim_sgd_cuda(float *param, float *mom, const float *grad, size_t n, float lr,
                         float momentum, float weight_decay, pl_stream *s);
void kern_optim_adamw_cuda(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int t,
                           pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
