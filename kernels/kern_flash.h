/* kern_flash.h - attention of a block of queries against one block of keys and values,
 * with its log-sum-exp, and the exact merge of two such partial results (the online
 * softmax of flash-attention, one block at a time: Lab 10's context parallelism).
 *
 * Layouts (row-major, float32; token-major so that a sequence shard is a block of rows):
 *   q, o      [nq, H, d]     a query block and its output
 *   k, v      [nk, Hkv, d]   a key/value block; query head h reads kv head h / (H / Hkv)
 *                            (grouped-query attention: Hkv divides H; Hkv = H is MHA)
 *   lse       [nq, H]        per query row and head: log sum_j exp(scale * q.k_j) over the
 *                            keys it saw; -INFINITY when it saw none (its o row is then 0)
 *   q_pos     [nq], k_pos [nk]  int: the tokens' positions in the whole sequence (device
 *                            arrays: host memory on the cpu device). With causal != 0 a
 *                            query at position p sees the keys at positions <= p only.
 *
 * kern_flash_block:  o = softmax(scale * q k^T, masked) v over this block alone, lse its
 *                    log-sum-exp. No score matrix is kept: memory is o and lse.
 * kern_flash_merge:  (o, lse) <- the attention over the keys of both (o, lse) and
 *                    (o_blk, lse_blk): with m = max(lse, lse_blk),
 *                      w = exp(lse - m), w_b = exp(lse_blk - m),
 *                      o = (w o + w_b o_blk) / (w + w_b),  lse = m + log(w + w_b);
 *                    a side at -INFINITY contributes nothing. rows = nq * H rows of d.
 *
 * kern_flash_block_backward: the gradients of the attention of the query block over the
 *                    WHOLE key set, restricted to this key block: with the final (o, lse)
 *                    of each query row (after every block was merged) and its output
 *                    gradient dout, P = exp(scale q.k - lse) is the row's final
 *                    probability of each key of the block, and
 *                      D = dout . o (per row),  dP = dout . v,  dS = P (dP - D),
 *                      dq += scale dS k,  dk += scale dS^T q,  dv += P^T dout
 *                    (ACCUMULATED, +=; dk and dv sum over the query heads sharing a kv
 *                    head). Summed over all key blocks, dq is the whole gradient; summed
 *                    over all query blocks, dk and dv are.
 *
 * The work of a kern_flash_block (or _backward) call, as the trace counts it, is
 * nq * nk * H (query, key) pairs whatever the mask: a GPU computes the masked part of a tile too, so a
 * block entirely above the causal diagonal is work a ring attention must skip.
 * Three entry points per function, as in every kernels/ family.
 */
#ifndef KERN_FLASH_H
#define KERN_FLASH_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

void kern_flash_block(float *o,          /* [nq, H, d]   */
                      float *lse,        /* [nq, H]      */
                      const float *q,    /* [nq, H, d]   */
                      const float *k,    /* [nk, Hkv, d] */
                      const float *v,    /* [nk, Hkv, d] */
                      const int *q_pos,  /* [nq]         */
                      const int *k_pos,  /* [nk]         */
                      int nq, int nk, int H, int Hkv, int d, int causal, float scale, pl_stream *s);

void kern_flash_block_backward(float *dq,         /* [nq, H, d]   (+=) */
                               float *dk,         /* [nk, Hkv, d] (+=) */
                               float *dv,         /* [nk, Hkv, d] (+=) */
                               const float *q,    /* [nq, H, d]   */
                               const float *k,    /* [nk, Hkv, d] */
                               const float *v,    /* [nk, Hkv, d] */
                               const float *o,    /* [nq, H, d]: the final output */
                               const float *lse,  /* [nq, H]: the final log-sum-exp */
                               const float *dout, /* [nq, H, d]   */
                               const int *q_pos, const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal,
                               float scale, pl_stream *s);

void kern_flash_merge(float *o,             /* [rows, d] */
                      float *lse,           /* [rows]    */
                      const float *o_blk,   /* [rows, d] */
                      const float *lse_blk, /* [rows]    */
                      int rows, int d, pl_stream *s);

/* Bytes read + written and flops of one call, as the trace and the cost model count
 * them (docs/cost-model.md, "Kernels"). kern_flash_pair_flops(d): the flops of one
 * (query, key) pair, so a call's pairs are its flops divided by it. */
void kern_flash_block_cost(int nq, int nk, int H, int Hkv, int d, double *bytes, double *flops);
void kern_flash_merge_cost(int rows, int d, double *bytes, double *flops);
void kern_flash_backward_cost(int nq, int nk, int H, int Hkv, int d, double *bytes, double *flops);
double kern_flash_pair_flops(int d);
double kern_flash_backward_pair_flops(int d);

void kern_flash_block_ref(float *o, float *lse, const float *q, const float *k, const float *v,
                          const int *q_pos, const int *k_pos, int nq, int nk, int H, int Hkv, int d,
                          int causal, float scale);
void kern_flash_merge_ref(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows,
                          int d);
void kern_flash_block_backward_ref(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                   const float *o, const float *lse, const float *dout, const int *q_pos,
                                   const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale);
#ifdef PL_HAVE_CUDA
void kern_flash_block_cuda(float *o, float *lse, const float *q, const float *k, const float *v,
                           const int *q_pos, const int *k_pos, int nq, int nk, int H, int Hkv, int d,
                           int causal, float scale, pl_stream *s);
void kern_flash_merge_cuda(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows,
                           int d, pl_stream *s);
void kern_flash_block_backward_cuda(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                    const float *o, const float *lse, const float *dout, const int *q_pos,
                                    const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale,
                                    pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
