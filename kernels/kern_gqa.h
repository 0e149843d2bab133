/* kern_gqa.h - grouped-query causal attention over a KV cache (inference), and the store
 * of new keys and values into that cache. Forward only.
 *
 * The KV cache of one layer on one rank is two tensors, K and V, each
 *   [n_seq_max, n_ctx, n_kv_heads, head_dim]     row-major, float32
 * element (s, p, g, d) at ((s * n_ctx + p) * n_kv_heads + g) * head_dim + d: sequence s,
 * position p, KV head g. One (sequence, position) is one contiguous row of
 * n_kv_heads * head_dim floats, exactly what the k projection of one token writes, and a
 * sequence is one contiguous block of n_ctx rows. KV-cache bytes per layer and rank:
 *   2 * n_seq_max * n_ctx * n_kv_heads * head_dim * 4
 * n_kv_heads is the rank's own count: a tensor-parallel rank caches only the KV heads of
 * its query heads, a layer-split rank only its layers.
 *
 * Attention: token t (sequence seq_id[t], position pos[t]) and query head h, with
 * n_heads = group * n_kv_heads, read KV head h / group and compute
 *   out[t, h, :] = sum_{p <= pos[t]} softmax_p(scale * q[t, h, :] . K[seq, p, h/group, :]) V[seq, p, h/group, :]
 * over positions 0 .. pos[t] of its own sequence (causal by position, so a prompt of many
 * tokens and a decode step of one use the same code, and a batch may mix sequences).
 * kern_kv_store must have written every position 0 .. pos[t] first (the batch's own
 * tokens included). The softmax subtracts the row maximum before the exponential.
 *
 * seq_id and pos are device arrays (host memory on the cpu device). A token whose seq_id
 * is outside [0, n_seq_max) or whose pos is outside [0, n_ctx) is skipped by the store
 * and gets zeros from attention (never an access out of the cache); models/llama.c
 * rejects such batches with a message before they get here.
 * Three entry points per function, as in every kernels/ family (_ref: CPU reference;
 * _cuda: CUDA version; no suffix: the dispatcher).
 */
#ifndef KERN_GQA_H
#define KERN_GQA_H

#include <stdint.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

/* K[seq_id[t], pos[t], :, :] = k[t, :, :] and the same for V. */
void kern_kv_store(float *k_cache,     /* [n_seq_max, n_ctx, n_kv_heads, head_dim] */
                   float *v_cache,     /* [n_seq_max, n_ctx, n_kv_heads, head_dim] */
                   const float *k,     /* [n_tokens, n_kv_heads, head_dim]          */
                   const float *v,     /* [n_tokens, n_kv_heads, head_dim]          */
                   const int *seq_id,  /* [n_tokens]                                */
                   const int *pos,     /* [n_tokens]                                */
                   int n_tokens, int n_kv_heads, int head_dim, int n_seq_max, int n_ctx,
                   pl_stream *s);

/* n_heads must be a multiple of n_kv_heads; scale is 1/sqrt(head_dim) in llama.
 * n_attended = sum over t of (pos[t] + 1), the cache rows the call reads per head; it
 * only sizes the trace record (the caller has the positions on the host), the kernels
 * read pos itself. The CUDA version takes head_dim <= 256 and keeps n_ctx scores in
 * shared memory (n_ctx up to about 12000 in the default 48 KiB, more where the GPU
 * allows larger blocks). */
void kern_gqa_attention_forward(float *out,           /* [n_tokens, n_heads, head_dim]             */
                                const float *q,       /* [n_tokens, n_heads, head_dim]             */
                                const float *k_cache, /* [n_seq_max, n_ctx, n_kv_heads, head_dim]  */
                                const float *v_cache, /* [n_seq_max, n_ctx, n_kv_heads, head_dim]  */
                                const int *seq_id,    /* [n_tokens]                                */
                                const int *pos,       /* [n_tokens]                                */
                                int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                int n_seq_max, int n_ctx, float scale, int64_t n_attended,
                                pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). */
void kern_kv_store_cost(int n_tokens, int n_kv_heads, int head_dim, double *bytes, double *flops);
void kern_gqa_attention_cost(int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                             int64_t n_attended, double *bytes, double *flops);

void kern_kv_store_ref(float *k_cache, float *v_cache, const float *k, const float *v,
                       const int *seq_id, const int *pos, int n_tokens, int n_kv_heads,
                       int head_dim, int n_seq_max, int n_ctx);
void kern_gqa_attention_forward_ref(float *out, const float *q, const float *k_cache,
                                    const float *v_cache, const int *seq_id, const int *pos,
                                    int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                    int n_seq_max, int n_ctx, float scale);
#ifdef PL_HAVE_CUDA
void kern_kv_store_cuda(float *k_cache, float *v_cache, const float *k, const float *v,
                        const int *seq_id, const int *pos, int n_tokens, int n_kv_heads,
                        int head_dim, int n_seq_max, int n_ctx, pl_stream *s);
void kern_gqa_attention_forward_cuda(float *out, const float *q, const float *k_cache,
                                     const float *v_cache, const int *seq_id, const int *pos,
                                     int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                     int n_seq_max, int n_ctx, float scale, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
