/* kern_residual.h - the residual connection: out = a + b, and its backward pass.
 * Three entry points per function as described in kern_layernorm.h. */
#ifndef KERN_RESIDUAL_H
#define KERN_RESIDUAL_H

#include <stddef.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* out may alias a or b (in-place residual). */
void kern_residual_forward(float *out,     /* [n] */
                           const float *a, /* [n] */
                           const float *b, /* [n] */
                           size_t n, pl_stream *s);
/* Both branches receive dout: da += dout, db += dout (accumulated: the residual stream's
 * gradient is a sum over the branches that read it). */
void kern_residual_backward(float *da,         /* [n] */
                            float *db,         /* [n] */
                            const float *dout, /* [n] */
                            size_t n, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_residual_cost(size_t n, int backward, double *bytes, double *flops);

void kern_residual_forward_ref(float *out, const float *a, const float *b, size_t n);
void kern_residual_backward_ref(float *da, float *db, const float *dout, size_t n);
#ifdef PL_HAVE_CUDA
void kern_residual_forward_cuda(float *out, const float *a, const float *b, size_t n,
                                pl_stream *s);
void kern_residual_backward_cuda(float *da, float *db, const float *dout, size_t n,
                                 pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
