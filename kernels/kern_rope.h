/* kern_rope.h - rotary position embedding (RoPE) of q or k, in place, forward only.
 *
 * x is [n_tokens, n_heads, head_dim] (a token's heads side by side, as a projection
 * x W^T writes them), head_dim even, one position per token. Pair i of every head of token
 * t is rotated by the angle pos[t] * theta^(-2i / head_dim):
 *   x'[2i]   = x[2i] cos a - x[2i+1] sin a
 *   x'[2i+1] = x[2i] sin a + x[2i+1] cos a
 * The pairs are ADJACENT elements: llama.cpp's "NORM" rope, the one its llama
 * architecture applies to GGUF weights.
 *
 * Why adjacent pairs when Hugging Face's llama code rotates halves (x[i] with
 * x[i + head_dim/2], "NEOX" style)? The two conventions differ only by the order of the
 * rows of Wq and Wk inside each head. Meta's original llama rotated adjacent pairs;
 * Hugging Face's checkpoint converter reordered the q and k rows of every head (row 2i
 * to row i, row 2i+1 to row i + head_dim/2) so that its rotate-half code gives the same
 * model, and llama.cpp's HF-to-GGUF converter applies the inverse reordering, so a GGUF
 * llama is back in the adjacent-pair order. Attention only uses dot products q . k, which
 * do not change when q and k are permuted the same way, so both give the same outputs -
 * but a rope of one convention on weights of the other is wrong. A model that calls
 * for rotate-half (architectures that llama.cpp runs with NEOX rope) needs a different
 * kernel; this one is for llama weights as GGUF stores them.
 *
 * A rank that holds only some heads (tensor parallelism) passes its own head count: the
 * angle depends on the position and the pair, not on the head.
 * Three entry points with the same arguments, as in every kernels/ family (_ref: CPU
 * reference; _cuda: CUDA version; no suffix: the dispatcher).
 */
#ifndef KERN_ROPE_H
#define KERN_ROPE_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* pos is a device array (host memory on the cpu device). theta is the frequency base
 * (llama.rope.freq_base: 10000 for llama 2, 100000 for SmolLM2). */
void kern_rope_forward(float *x,        /* [n_tokens, n_heads, head_dim], in place */
                       const int *pos,  /* [n_tokens]                              */
                       int n_tokens, int n_heads, int head_dim, float theta, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_rope_cost(int n_tokens, int n_heads, int head_dim, double *bytes, double *flops);

void kern_rope_forward_ref(float *x, const int *pos, int n_tokens, int n_heads, int head_dim,
                           float theta);
#ifdef PL_HAVE_CUDA
void kern_rope_forward_cuda(float *x, const int *pos, int n_tokens, int n_heads, int head_dim,
                            float theta, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
