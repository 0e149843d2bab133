/* kern_gelu.h - GELU activation (tanh approximation, as in GPT-2), forward and backward.
 *
 *   gelu(x) = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2 / pi)
 * Three entry points with the same arguments, as in every kernels/ family:
 *   kern_gelu_*        dispatcher: CPU reference or CUDA version, ordered on stream s
 *   kern_gelu_*_ref    CPU reference (plain loops, host pointers, no stream)
 *   kern_gelu_*_cuda   CUDA version (device pointers, launched on s; CUDA builds only)
 */
#ifndef KERN_GELU_H
#define KERN_GELU_H

#include <stddef.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* out may equal in (in place). */
void kern_gelu_forward(float *out,      /* [n] */
                       const float *in, /* [n] */
                       size_t n, pl_stream *s);
/* dx = dy * gelu'(x), written (=); dx may equal dy. */
void kern_gelu_backward(float *dx,       /* [n] */
                        const float *dy, /* [n] gradient of the output */
                        const float *x,  /* [n] the forward input      */
                        size_t n, pl_stream *s);

/* What one call counts in the trace and the cost model (docs/cost-model.md, "Kernels"):
 * bytes read + written and flops, forward (backward = 0) or backward (1). */
void kern_gelu_cost(size_t n, int backward, double *bytes, double *flops);

void kern_gelu_forward_ref(float *out, const float *in, size_t n);
void kern_gelu_backward_ref(float *dx, const float *dy, const float *x, size_t n);
#ifdef PL_HAVE_CUDA
void kern_gelu_forward_cuda(float *out, const float *in, size_t n, pl_stream *s);
void kern_gelu_backward_cuda(float *dx, const float *dy, const float *x, size_t n, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
