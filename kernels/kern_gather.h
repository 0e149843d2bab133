/* kern_gather.h - copy chosen rows of a matrix into a dense one:
 *   out[i, :] = src[idx[i], :]
 * The token-embedding lookup of a model without position embeddings (idx = token ids,
 * src = the embedding table), and picking the rows whose logits are wanted (the last
 * token of each sequence). Indices must be in [0, rows of src).
 * Three entry points with the same arguments, as in every kernels/ family (_ref: CPU
 * reference; _cuda: CUDA version; no suffix: the dispatcher).
 */
#ifndef KERN_GATHER_H
#define KERN_GATHER_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* idx is a device array (host memory on the cpu device). out must not overlap src. */
void kern_gather_rows(float *out,       /* [n, C]             */
                      const float *src, /* [rows of src, C]   */
                      const int *idx,   /* [n]                */
                      int n, int C, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_gather_cost(int n, int C, double *bytes, double *flops);

void kern_gather_rows_ref(float *out, const float *src, const int *idx, int n, int C);
#ifdef PL_HAVE_CUDA
void kern_gather_rows_cuda(float *out, const float *src, const int *idx, int n, int C,
                           pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
