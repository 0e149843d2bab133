/* kern_softmax.h - causal (lower-triangular) softmax over attention scores, forward and
 * backward. Three entry points per function as described in kern_layernorm.h.
 *
 * For each of the R = batch * heads score matrices [T, T], row t keeps columns j <= t:
 *   probs[t, j] = exp(scale * scores[t, j] - max) / sum over j' <= t,   probs[t, j > t] = 0.
 * The scale (1/sqrt(head size) in attention) is applied here so the GEMM before it stays
 * a plain product. */
#ifndef KERN_SOFTMAX_H
#define KERN_SOFTMAX_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* probs may alias scores (in place). Masked entries (j > t) are written as 0. */
void kern_softmax_forward(float *probs,        /* [R, T, T] */
                          const float *scores, /* [R, T, T] */
                          int R, int T, float scale, pl_stream *s);
/* dscores[t, j] = scale * probs[t, j] * (dprobs[t, j] - sum_j' probs[t, j'] dprobs[t, j']),
 * 0 where masked. dscores may alias dprobs. */
void kern_softmax_backward(float *dscores,      /* [R, T, T] */
                           const float *dprobs, /* [R, T, T] */
                           const float *probs,  /* [R, T, T] */
                           int R, int T, float scale, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_softmax_cost(int R, int T, int backward, double *bytes, double *flops);

void kern_softmax_forward_ref(float *probs, const float *scores, int R, int T, float scale);
void kern_softmax_backward_ref(float *dscores, const float *dprobs, const float *probs, int R,
                               int T, float scale);
#ifdef PL_HAVE_CUDA
void kern_softmax_forward_cuda(float *probs, const float *scores, int R, int T, float scale,
                               pl_stream *s);
void kern_softmax_backward_cuda(float *dscores, const float *dprobs, const float *probs, int R,
                                int T, float scale, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
