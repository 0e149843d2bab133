/* kern_bias.h - bias of a linear layer: added to every row forward, summed over the rows
 * (the batch) backward. Entry points as in every kernels/ family (see kern_gelu.h):
 * dispatcher, _ref (CPU reference), _cuda (CUDA builds only).
 */
#ifndef KERN_BIAS_H
#define KERN_BIAS_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, c] += bias[c] (in place, after the GEMM that wrote y). */
void kern_bias_forward(float *y,          /* [rows, cols] */
                       const float *bias, /* [cols]       */
                       int rows, int cols, pl_stream *s);
/* dbias[c] += sum_r dy[r, c]: accumulated (+=) like every weight gradient in kernels/, so
 * micro-batches add up; zero dbias first for a fresh gradient. */
void kern_bias_backward(float *dbias,    /* [cols]       */
                        const float *dy, /* [rows, cols] */
                        int rows, int cols, pl_stream *s);

/* Bytes read + written and flops of one call, forward (backward = 0) or backward (1), as
 * the trace and the cost model count them (docs/cost-model.md, "Kernels"). */
void kern_bias_cost(int rows, int cols, int backward, double *bytes, double *flops);

void kern_bias_forward_ref(float *y, const float *bias, int rows, int cols);
void kern_bias_backward_ref(float *dbias, const float *dy, int rows, int cols);
#ifdef PL_HAVE_CUDA
void kern_bias_forward_cuda(float *y, const float *bias, int rows, int cols, pl_stream *s);
void kern_bias_backward_cuda(float *dbias, const float *dy, int rows, int cols, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
