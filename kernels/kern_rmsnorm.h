/* kern_rmsnorm.h - RMS normalisation over the last dimension (llama), forward only.
 *
 *   out[i, c] = inp[i, c] / sqrt(mean_c(inp[i, :]^2) + eps) * weight[c]
 * No mean is subtracted and there is no bias: llama's norm rescales, it does not centre.
 * Three entry points with the same arguments, as in every kernels/ family:
 *   kern_rmsnorm_forward        dispatcher: CPU reference or CUDA version, ordered on s
 *   kern_rmsnorm_forward_ref    CPU reference (plain loops, host pointers, no stream)
 *   kern_rmsnorm_forward_cuda   CUDA version (device pointers, launched on s; CUDA builds only)
 */
#ifndef KERN_RMSNORM_H
#define KERN_RMSNORM_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* out may equal inp (in place): each row is read whole before it is written. */
void kern_rmsnorm_forward(float *out,          /* [N, C] */
                          const float *inp,    /* [N, C] */
                          const float *weight, /* [C]    */
                          int N, int C, float eps, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_rmsnorm_cost(int N, int C, double *bytes, double *flops);

void kern_rmsnorm_forward_ref(float *out, const float *inp, const float *weight, int N, int C,
                              float eps);
#ifdef PL_HAVE_CUDA
void kern_rmsnorm_forward_cuda(float *out, const float *inp, const float *weight, int N, int C,
                               float eps, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
