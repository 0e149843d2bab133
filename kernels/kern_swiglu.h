/* kern_swiglu.h - the gated activation of llama's feed-forward network, forward only.
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

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_swiglu_cost(size_t n, double *bytes, double *flops);

void kern_swiglu_forward_ref(float *out, const float *gate, const float *up, size_t n);
#ifdef PL_HAVE_CUDA
void kern_swiglu_forward_cuda(float *out, const float *gate, const float *up, size_t n,
                              pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
