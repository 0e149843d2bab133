/* kern_swiglu.h - the gated activation of llama's feed-forward network (and of Lab 9's
 * experts, which also need its backward).
 *
 *   out = silu(gate) * up,   silu(x) = x / (1 + e^-x)
 * where gate = x W_gate^T and up = x W_up^T; the FFN output is then out W_down^T.
 * Three entry points with the same arguments, as in every kernels/ family (_ref: CPU
 * reference; _cuda: CUDA version; no suffix: the dispatcher).
 */
#ifndef KERN_SWIGLU_H
#define KERN_SWIGLU_H

#include <stddef.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* Elementwise over n = rows x F; out may equal gate or up (in place). */
void kern_swiglu_forward(float *out,        /* [n] */
                         const float *gate, /* [n] */
                         const float *up,   /* [n] */
                         size_t n, pl_stream *s);

/* Backward: dgate = dout * up * silu'(gate), dup = dout * silu(gate), both written;
 * silu'(x) = s (1 + x (1 - s)) with s = 1 / (1 + e^-x). dgate and dup may alias gate and up
 * (in place), not each other. */
void kern_swiglu_backward(float *dgate,       /* [n] */
                          float *dup,         /* [n] */
                          const float *dout,  /* [n] */
                          const float *gate,  /* [n] */
                          const float *up,    /* [n] */
                          size_t n, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_swiglu_cost(size_t n, double *bytes, double *flops);
void kern_swiglu_backward_cost(size_t n, double *bytes, double *flops);

void kern_swiglu_forward_ref(float *out, const float *gate, const float *up, size_t n);
void kern_swiglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                              size_t n);
#ifdef PL_HAVE_CUDA
void kern_swiglu_forward_cuda(float *out, const float *gate, const float *up, size_t n,
                              pl_stream *s);
void kern_swiglu_backward_cuda(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                               size_t n, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
