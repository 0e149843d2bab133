/* kern_embedding.h - token + position embedding, forward and backward.
 * Three entry points per function as described in kern_layernorm.h.
 *
 * Activations are sequence-major, [T, B, C] (Megatron's [s, b, h]), so a sequence shard
 * t0 .. t0+T-1 is one contiguous block of rows; t0 is that shard's first position. */
#ifndef KERN_EMBEDDING_H
#define KERN_EMBEDDING_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, b, :] = wte[tokens[t, b], :] + wpe[t0 + t, :]. Token ids must be in [0, V). */
void kern_embedding_forward(float *out,        /* [T, B, C]           */
                            const int *tokens, /* [T, B]              */
                            const float *wte,  /* [V, C]              */
                            const float *wpe,  /* [max positions, C]  */
                            int T, int B, int C, int t0, pl_stream *s);
/* Accumulated (+=): dwte[tokens[t, b], :] += dout[t, b, :], dwpe[t0 + t, :] += dout[t, b, :].
 * The CUDA version adds with atomics, so repeated tokens sum in no fixed order (its
 * result may differ from the reference in the last bits). */
void kern_embedding_backward(float *dwte,        /* [V, C]          */
                             float *dwpe,        /* [max positions, C] */
                             const float *dout,  /* [T, B, C]       */
                             const int *tokens,  /* [T, B]          */
                             int T, int B, int C, int t0, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_embedding_cost(int T, int B, int C, int backward, double *bytes, double *flops);

void kern_embedding_forward_ref(float *out, const int *tokens, const float *wte,
                                const float *wpe, int T, int B, int C, int t0);
void kern_embedding_backward_ref(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                 int T, int B, int C, int t0);
#ifdef PL_HAVE_CUDA
void kern_embedding_forward_cuda(float *out, const int *tokens, const float *wte,
                                 const float *wpe, int T, int B, int C, int t0, pl_stream *s);
void kern_embedding_backward_cuda(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                  int T, int B, int C, int t0, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
