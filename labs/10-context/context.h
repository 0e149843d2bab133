/* context.h - Lab 10: context parallelism, one long sequence split across the ranks by
 * token positions (do not edit; you implement the functions declared below in context.c).
 *
 * The sequence has S tokens; each rank holds some of them (its "local" tokens, Sl of them)
 * and only their queries, keys and values:
 *   q, o   [Sl, H, d]     this rank's tokens, H query heads of size d (device)
 *   k, v   [Sl, Hkv, d]   their keys and values, Hkv heads (device)
 *   lse    [Sl, H]        per local token and head: the log-sum-exp of its attention scores
 *                         over every key it attends to (kept for the backward) (device)
 *   pos    [Sl]           int: the position in the sequence of each local token (host)
 * Attention is softmax(q k^T / sqrt(d)) v per head, query head h reading key/value head
 * h / (H / Hkv) (grouped-query attention; Hkv = H is plain multi-head attention); causal: a
 * token at position p attends to the tokens at positions <= p only.
 *
 * Which tokens a rank holds (README.md, "3. Load balance", has the picture):
 *   the sequence is cut into C chunks, C = n (CP_CONTIGUOUS) or 2n (CP_ZIGZAG); chunk c
 *   has S / C tokens, one more for the first S % C chunks (no padding: chunks differ by
 *   one token at most);
 *   CP_CONTIGUOUS: rank r holds chunk r;
 *   CP_ZIGZAG:     rank r holds chunk r, then chunk 2n - 1 - r (its local tokens in that
 *                  order), so that every rank has early and late tokens alike.
 *
 * The kernels you compute with (kernels/kern_flash.h): kern_flash_block, the attention of
 * a query block against one key/value block with its log-sum-exp, and kern_flash_merge,
 * which merges two partial results exactly (what your cp_merge does, on the device);
 * kern_gather_rows (kernels/kern_gather.h) to rearrange rows.
 */
#ifndef LAB10_CONTEXT_H
#define LAB10_CONTEXT_H

#include <stddef.h>

#include "pl.h"

enum {
    CP_OK = 0,
    CP_ERR_SHAPE = 1,    /* seq, heads, kv_heads or head_dim < 1; heads not a multiple of
                          * kv_heads; causal not 0 or 1; layout unknown; seq < the chunks
                          * of the layout (n or 2n)                                        */
    CP_ERR_HEADS = 2,    /* Ulysses only: heads or kv_heads not a multiple of the ranks    */
    CP_ERR_MISMATCH = 3, /* the ranks disagree on a field                                  */
};

typedef enum { CP_CONTIGUOUS = 0, CP_ZIGZAG = 1 } cp_layout;

typedef struct {
    int seq;          /* S: tokens of the whole sequence, over all ranks  */
    int heads;        /* H: query heads                                   */
    int kv_heads;     /* Hkv: key/value heads (divides H)                 */
    int head_dim;     /* d                                                */
    int causal;       /* 1: causal mask by position; 0: every token       */
    cp_layout layout; /* which tokens each rank holds                     */
    pl_comm *comm;    /* the context-parallel group: the world here       */
} cp_config;

/* ===================================================================================== */
/* What you implement                                                                    */
/* ===================================================================================== */

/* The online-softmax merge on the host (no device, no communication): rows rows of d.
 * (o, lse) holds the attention of each row over some keys, (o_blk, lse_blk) over other
 * keys; afterwards (o, lse) is the attention over both sets, exactly:
 *   m = max(lse, lse_blk),  o = (exp(lse - m) o + exp(lse_blk - m) o_blk) / (exp(lse - m) + exp(lse_blk - m)),
 *   lse = m + log(exp(lse - m) + exp(lse_blk - m)).
 * A side whose lse is -INFINITY saw no key: it contributes nothing (both at -INFINITY:
 * (o, lse) unchanged). Scores can be large (lse in the hundreds): never exponentiate an
 * lse without subtracting m first. */
void cp_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d);

/* The positions of rank `rank`'s local tokens under c->layout, in local order, into pos
 * (host, room for S / n + 2 entries); returns their count. No communication. */
int cp_positions(const cp_config *c, int rank, int *pos);

/* CP_OK or one error, the same code on every rank of c->comm: CP_ERR_MISMATCH when the
 * ranks' fields differ, else the first of SHAPE, HEADS (HEADS only when ulysses != 0).
 * Collective: compare the fields over the ranks first (library collectives are allowed
 * here), so that a rank with other sizes makes every rank fail instead of hanging. */
int cp_config_check(const cp_config *c, int ulysses);

/* Ring attention (Megatron's context parallelism): o [Sl, H, d] and lse [Sl, H] of this
 * rank's queries against the keys of the whole sequence. The key/value blocks travel
 * around the ring: in each of n - 1 steps every rank sends the block it holds to rank
 * (me + 1) % n and receives the next one from rank (me - 1 + n) % n, K and V as two
 * messages (pl_send/pl_recv, no library collective), and computes its queries against the
 * block it holds with kern_flash_block, merging with kern_flash_merge. Every block goes
 * all the way round (its traffic does not depend on the mask). With causal, a (query
 * chunk, key chunk) pair whose keys all lie after its queries is never computed: the work
 * the grader counts is the kernel's (query, key) pairs, and it allows only the pairs of
 * chunk pairs that have an unmasked pair (and a rank's own block whole). Extra memory: two
 * key/value blocks (the one computed on and the one arriving) and one block's output, not
 * the sequence's keys (README.md, "Memory"). */
void cp_ring_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o, float *lse,
                     pl_stream *s);

/* The backward of cp_ring_forward: dq [Sl, H, d], dk and dv [Sl, Hkv, d] (written) from the
 * forward's final o and lse (the log-sum-exps are reused, never recomputed) and the output
 * gradient dout [Sl, H, d]. The key/value blocks travel around the ring again, as in the
 * forward (K and V in steps 0 .. n-2, posted before the step's compute), and with each
 * block the gradient of its keys and values accumulated so far: in step t a rank receives
 * the gradients of the block of rank (me - t) mod n from rank me - 1 (none in step 0: its
 * own block starts at zero), adds its queries' share with kern_flash_block_backward, and
 * sends them on to rank me + 1 with the next step's exchange; after the last step one more
 * exchange brings every block's gradients home (dK and dV: n messages each). The same
 * chunk pairs as the forward are computed, no others. */
void cp_ring_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *dout, float *dq, float *dk, float *dv, pl_stream *s);

/* Ulysses (DeepSpeed's): an all-to-all turns q [Sl, H, d] into [S, H/n, d] (every token of
 * the sequence, this rank's H/n heads: heads [me H/n, (me+1) H/n)), k and v into
 * [S, Hkv/n, d], the whole sequence's attention runs on those heads, and an all-to-all
 * brings o back to [Sl, H, d]. Four all-to-alls, each one message to every other rank
 * (pl_send/pl_recv, no library collective); the gathered sequence is every rank's tokens
 * in rank order, at their positions (cp_positions of each rank). Needs H and Hkv
 * multiples of n (cp_config_check says CP_ERR_HEADS otherwise). */
void cp_ulysses_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o,
                        pl_stream *s);

/* The backward of cp_ulysses_forward: dq [Sl, H, d], dk and dv [Sl, Hkv, d] (written) from
 * dout [Sl, H, d]. Nothing is kept from the forward: q, k, v and dout go to the head split
 * (four all-to-alls), this rank's heads' attention is recomputed there for its o and lse
 * (kern_flash_block), kern_flash_block_backward runs over the whole sequence, and dq, dk,
 * dv come back (three all-to-alls): seven, each one message to every other rank. */
void cp_ulysses_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *dout,
                         float *dq, float *dk, float *dv, pl_stream *s);

/* Unified sequence parallelism (2-D): the n ranks as a grid of n / u rows of u consecutive
 * ranks (rank me = g u + j: row g, column j). Ulysses within each row (its all-to-alls over
 * the row's u ranks: rank j gets the row's tokens for heads [j H/u, (j+1) H/u)), the ring
 * across the rows (over the n / u ranks of column j, which hold the same heads: the blocks
 * are the rows' gathered tokens, K and V as two messages per step, n / u - 1 steps; a block
 * whose keys all come after the row's last query is skipped when causal), and Ulysses back.
 * u = n is Ulysses, u = 1 the ring. Needs u to divide n, H and Hkv. The row and column
 * communicators are yours to split (pl_comm_split) and free. */
void cp_usp_forward(const cp_config *c, int u, const float *q, const float *k, const float *v, float *o,
                    pl_stream *s);

/* Its backward: dq [Sl, H, d], dk and dv [Sl, Hkv, d] (written) from dout. q, k, v and dout go
 * to the row's head split (four all-to-alls), the column's ring recomputes the row's (o,
 * lse) (as the forward's ring) and then runs cp_ring_backward's scheme over the rows'
 * blocks (K and V n/u - 1 times, dK and dV n/u times; none at n/u = 1), and dq, dk, dv come
 * back (three all-to-alls). */
void cp_usp_backward(const cp_config *c, int u, const float *q, const float *k, const float *v, const float *dout,
                     float *dq, float *dk, float *dv, pl_stream *s);

#endif
