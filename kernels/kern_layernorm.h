/* kern_layernorm.h - layer normalisation over the last dimension, forward and backward.
 *
 * out[i, c] = (inp[i, c] - mean[i]) * rstd[i] * weight[c] + bias[c], with
 * rstd[i] = 1 / sqrt(var[i] + eps) and the biased (1/C) variance, as in GPT-2.
 * Every family in kernels/ has three entry points with the same arguments:
 *   kern_X_*        the dispatcher labs call: cpu reference or CUDA version, on stream s
 *   kern_X_*_ref    the CPU reference (plain loops, host pointers, no stream)
 *   kern_X_*_cuda   the CUDA version (device pointers, launched on s; CUDA builds only)
 */
#ifndef KERN_LAYERNORM_H
#define KERN_LAYERNORM_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* out, mean, rstd are written; mean/rstd are kept for the backward pass. */
void kern_layernorm_forward(float *out,          /* [N, C] */
                            float *mean,         /* [N]    */
                            float *rstd,         /* [N]    */
                            const float *inp,    /* [N, C] */
                            const float *weight, /* [C]    */
                            const float *bias,   /* [C]    */
                            int N, int C, float eps, pl_stream *s);
/* dinp is written (=); dweight and dbias are accumulated (+=) so that gradients of
 * several calls (micro-batches, sequence shards) add up: zero them first. */
void kern_layernorm_backward(float *dinp,         /* [N, C] */
                             float *dweight,      /* [C]    */
                             float *dbias,        /* [C]    */
                             const float *dout,   /* [N, C] */
                             const float *inp,    /* [N, C] */
                             const float *weight, /* [C]    */
                             const float *mean,   /* [N]    */
                             const float *rstd,   /* [N]    */
                             int N, int C, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_layernorm_cost(int N, int C, int backward, double *bytes, double *flops);

void kern_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C,
                                float eps);
void kern_layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *mean,
                                 const float *rstd, int N, int C);
#ifdef PL_HAVE_CUDA
void kern_layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                 const float *weight, const float *bias, int N, int C,
                                 float eps, pl_stream *s);
void kern_layernorm_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, const float *mean,
                                  const float *rstd, int N, int C, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
