/* kern_attention.h - causal multi-head self-attention, forward and backward.
 *
 * Layouts (sequence-major, Megatron's [s, b, h], so a tensor-parallel rank's heads are one
 * contiguous block of columns and a sequence shard one contiguous block of rows):
 *   qkv  [T, B, 3*H*hs]: head h owns columns [3*hs*h, 3*hs*(h+1)) holding its q | k | v
 *   out  [T, B, H*hs]:   head h owns columns [hs*h, hs*(h+1))
 *   probs [B, H, T, T]:  the softmax of each head, kept for the backward pass
 * H is the number of heads this call sees (a rank's heads under tensor parallelism).
 *
 * Unlike the elementwise families there is no separate CUDA kernel: the dispatcher is
 * built from pl_gemm (cuBLAS on the cuda device) and kern_softmax_* on stream s, so the
 * same code runs on both devices. kern_attention_*_ref is an independent plain-loop
 * reference that the tests compare the dispatcher against.
 */
#ifndef KERN_ATTENTION_H
#define KERN_ATTENTION_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* scale multiplies q.k before the softmax; attention uses 1/sqrt(hs). */
void kern_attention_forward(float *out,       /* [T, B, H*hs]   */
                            float *probs,     /* [B, H, T, T]   */
                            const float *qkv, /* [T, B, 3*H*hs] */
                            int T, int B, int H, int hs, float scale, pl_stream *s);
/* dqkv is written (=). dscratch is caller-provided workspace of the size of probs. */
void kern_attention_backward(float *dqkv,        /* [T, B, 3*H*hs] */
                             float *dscratch,    /* [B, H, T, T]   */
                             const float *dout,  /* [T, B, H*hs]   */
                             const float *qkv,   /* [T, B, 3*H*hs] */
                             const float *probs, /* [B, H, T, T]   */
                             int T, int B, int H, int hs, float scale, pl_stream *s);

void kern_attention_forward_ref(float *out, float *probs, const float *qkv, int T, int B, int H,
                                int hs, float scale);
void kern_attention_backward_ref(float *dqkv, float *dscratch, const float *dout,
                                 const float *qkv, const float *probs, int T, int B, int H,
                                 int hs, float scale);

#ifdef __cplusplus
}
#endif

#endif
