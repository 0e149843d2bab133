/* kern_argmax.h - the index of the largest value of each row (greedy decoding on the
 * device: 4 bytes per row go back to the host instead of a row of logits).
 *
 *   idx[i] = the lowest j with x[i, j] = max_j x[i, :]
 * NaN entries are ignored; a row with no number at all gives 0.
 * Three entry points with the same arguments, as in every kernels/ family (_ref: CPU
 * reference; _cuda: CUDA version; no suffix: the dispatcher).
 */
#ifndef KERN_ARGMAX_H
#define KERN_ARGMAX_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* idx is a device array (host memory on the cpu device). */
void kern_argmax(int *idx,       /* [N]    */
                 const float *x, /* [N, V] */
                 int N, int V, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_argmax_cost(int N, int V, double *bytes, double *flops);

void kern_argmax_ref(int *idx, const float *x, int N, int V);
#ifdef PL_HAVE_CUDA
void kern_argmax_cuda(int *idx, const float *x, int N, int V, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
