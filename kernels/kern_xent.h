/* kern_xent.h - softmax cross-entropy over classes, forward and backward, for a batch
 * whose loss is the mean over its rows. Entry points as in every kernels/ family (see
 * kern_gelu.h): dispatcher, _ref (CPU reference), _cuda (CUDA builds only).
 */
#ifndef KERN_XENT_H
#define KERN_XENT_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* probs = softmax(logits) per row (max-subtracted), losses[r] = -log probs[r, targets[r]].
 * The batch loss is the mean of losses (the caller averages; on a GPU it stays on device). */
void kern_xent_forward(float *losses,       /* [N]    */
                       float *probs,        /* [N, V] */
                       const float *logits, /* [N, V] */
                       const int *targets,  /* [N]    class indices in [0, V) */
                       int N, int V, pl_stream *s);
/* Gradient of the mean loss: dlogits = (probs - onehot(targets)) / N, written (=). */
void kern_xent_backward(float *dlogits,     /* [N, V] */
                        const float *probs, /* [N, V] */
                        const int *targets, /* [N]    */
                        int N, int V, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_xent_cost(int N, int V, int backward, double *bytes, double *flops);

void kern_xent_forward_ref(float *losses, float *probs, const float *logits, const int *targets,
                           int N, int V);
void kern_xent_backward_ref(float *dlogits, const float *probs, const int *targets, int N, int V);
#ifdef PL_HAVE_CUDA
void kern_xent_forward_cuda(float *losses, float *probs, const float *logits, const int *targets,
                            int N, int V, pl_stream *s);
void kern_xent_backward_cuda(float *dlogits, const float *probs, const int *targets, int N, int V,
                             pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
