/* kern_clip.h - gradient clipping by the global norm, and the AdamW step that applies it,
 * for optimizers whose state is spread over several buffers or several ranks (sharded data
 * parallelism: each rank holds a slice of every gradient).
 *
 * PyTorch's clip_grad_norm_(max_norm): total = sqrt(sum of every gradient element squared),
 * coef = min(1, max_norm / (total + 1e-6)), every gradient multiplied by coef. The norm is
 * global: with the gradient sharded, each rank sums the squares of its own shard
 * (kern_clip_sumsq, accumulating over its buffers into one device float), the ranks add
 * their sums (one all-reduce of one float), and each rank turns the sum into coef
 * (kern_clip_coef) and steps with it. Nothing goes through the host: coef stays on the
 * device, where the AdamW kernels read it.
 *
 * Entry points as in every kernels/ family (kern_gelu.h): dispatcher, _ref (CPU
 * reference), _cuda (CUDA builds only). bf16 arrays are uint16_t words (kern_bf16.h).
 */
#ifndef KERN_CLIP_H
#define KERN_CLIP_H

#include <stddef.h>
#include <stdint.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_CLIP_EPS 1e-6 /* added to the norm before dividing, as PyTorch does */

/* acc[0] += sum of x[i]^2 over n elements (summed in double, added to the float acc). */
void kern_clip_sumsq(float *acc,      /* [1] device                   */
                     const float *x,  /* [n]                          */
                     size_t n, pl_stream *s);
void kern_clip_sumsq_bf16(float *acc, /* [1] device                   */
                          const uint16_t *x, /* [n] bf16 words         */
                          size_t n, pl_stream *s);
/* coef[0] = min(1, max_norm / (sqrt(sumsq[0]) + KERN_CLIP_EPS)). coef may alias sumsq. */
void kern_clip_coef(float *coef, const float *sumsq, float max_norm, pl_stream *s);

/* AdamW (kern_optim.h's formulas, t counting from 1) on the clipped gradient
 * g = coef[0] * grad:
 *   param -= lr * weight_decay * param;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   param -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). */
void kern_clip_adamw(float *param,      /* [n] updated in place            */
                     float *m,          /* [n] first moment                */
                     float *v,          /* [n] second moment               */
                     const float *grad, /* [n]                             */
                     const float *coef, /* [1] device: the clip coefficient */
                     size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                     int t, pl_stream *s);
/* Mixed precision: the same step on the fp32 master weights from a bf16 gradient, then the
 * bf16 parameters rounded from the new master: param_out[i] = bf16(master[i]). */
void kern_clip_adamw_bf16(float *master,        /* [n] fp32 master weights, updated */
                          float *m, float *v,   /* [n] fp32 moments                 */
                          const uint16_t *grad, /* [n] bf16                         */
                          const float *coef,    /* [1] device                       */
                          uint16_t *param_out,  /* [n] bf16, written                */
                          size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, int t, pl_stream *s);

/* Bytes read + written and flops of one call (docs/cost-model.md, "Kernels").
 * which: 0 sumsq, 1 sumsq bf16, 2 coef, 3 adamw, 4 adamw bf16. */
void kern_clip_cost(size_t n, int which, double *bytes, double *flops);

void kern_clip_sumsq_ref(float *acc, const float *x, size_t n);
void kern_clip_sumsq_bf16_ref(float *acc, const uint16_t *x, size_t n);
void kern_clip_coef_ref(float *coef, const float *sumsq, float max_norm);
void kern_clip_adamw_ref(float *param, float *m, float *v, const float *grad, const float *coef,
                         size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                         int t);
void kern_clip_adamw_bf16_ref(float *master, float *m, float *v, const uint16_t *grad,
                              const float *coef, uint16_t *param_out, size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, int t);
#ifdef PL_HAVE_CUDA
void kern_clip_sumsq_cuda(float *acc, const float *x, size_t n, pl_stream *s);
void kern_clip_sumsq_bf16_cuda(float *acc, const uint16_t *x, size_t n, pl_stream *s);
void kern_clip_coef_cuda(float *coef, const float *sumsq, float max_norm, pl_stream *s);
void kern_clip_adamw_cuda(float *param, float *m, float *v, const float *grad, const float *coef,
                          size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, int t, pl_stream *s);
void kern_clip_adamw_bf16_cuda(float *master, float *m, float *v, const uint16_t *grad,
                               const float *coef, uint16_t *param_out, size_t n, float lr,
                               float beta1, float beta2, float eps, float weight_decay, int t,
                               pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
