/* gpt_cp.h - the GPT-2 block of gpt.h with one sequence's tokens split over a
 * context-parallel group (Lab 10): each rank holds some of the sequence's rows, runs every
 * token-wise piece (layer norms, the four linear layers, GELU, residuals) on them alone,
 * and hands attention to a context-parallel attention (ring, Ulysses, their 2-D grid)
 * that sees the rest of the sequence through the group.
 *
 * Same parameters, layouts and initialisation as gpt.h, replicated on every rank (a
 * gpt_block_params from gpt_block_params_alloc or gpt_tp_block_view at t = 1). The config
 * is the whole sequence's: seq = S tokens, batch = 1. This rank's rows x [rows, C] are its
 * local tokens in the order its attention expects (the lab's layout, README.md of
 * labs/10-context); which positions they are is the attention's business, not the
 * block's: every other piece is the same function of each row.
 *
 * Attention is the serial block's, head by head: the fused QKV output [rows, 3C] (head h's
 * q | k | v at columns [3 hs h, 3 hs (h + 1))) is split into q, k, v [rows, H, hs], the
 * attention writes o [rows, H, hs] = [rows, C] (head h at columns [hs h, hs (h + 1))),
 * and its backward's dq, dk, dv are joined back into the fused layout.
 *
 * Backward: dx of this rank's rows, and the parameter gradients of the whole sequence:
 * each rank's share (its rows') is summed over the group with one all-reduce of the
 * block's parameter count (what DDP does over the context- and data-parallel ranks in
 * Megatron-LM), then accumulated (+=) into g, so every rank ends with the same gradients
 * as the serial block's. The attention's own traffic is whatever its functions send.
 */
#ifndef GPT_CP_H
#define GPT_CP_H

#include <stdbool.h>
#include <stddef.h>

#include "gpt.h"     // defines: gpt_config, gpt_block_params
#include "pl_comm.h" // defines: pl_comm

#ifdef __cplusplus
extern "C" {
#endif

/* A context-parallel attention: this rank's rows' attention over the whole sequence.
 * forward: o [rows, H, hs] and, where the attention keeps it, lse [rows, H] (the
 * log-sum-exp of each row's scores; an attention that does not keep it may leave it).
 * backward: dq, dk, dv [rows, H, hs] (written) from dout, with the forward's o and lse. */
typedef struct {
    void (*forward)(void *ctx, const float *q, const float *k, const float *v, float *o, float *lse, pl_stream *s);
    void (*backward)(void *ctx, const float *q, const float *k, const float *v, const float *o, const float *lse,
                     const float *dout, float *dq, float *dk, float *dv, pl_stream *s);
    void *ctx;
} gpt_cp_attention;

/* True when c is a block these functions run (gpt_config_valid, batch 1) with `rows` local
 * rows (1 <= rows <= seq); otherwise false with one line in why. */
bool gpt_cp_config_valid(const gpt_config *c, int rows, char *why, size_t why_len);

/* What one block keeps for its backward (one pl_malloc), with R = rows:
 *   x, ln1, x1, ln2 [R, C]; qkv [R, 3C]; q, k, v [R, C]; att [R, C]; lse [R, H];
 *   fc1, gel [R, F]; both layer norms' mean and rstd [R]
 *   = 4 * R * (12C + 2F + H + 4) bytes, plus 2 * 3 * R * H ints of split/join indices.
 * No score matrix: the attention keeps what it keeps (its lse). Memory grows with the
 * local rows, S / n, not with S. The backward's temporaries (gradients of the same
 * tensors and one copy of the parameters' gradients) are allocated and freed inside it. */
typedef struct gpt_cp_acts gpt_cp_acts;
size_t gpt_cp_acts_bytes(const gpt_config *c, int rows);
gpt_cp_acts *gpt_cp_acts_alloc(const gpt_config *c, int rows);
void gpt_cp_acts_free(gpt_cp_acts *a);

/* y [rows, C] = block(x [rows, C]) on this rank's rows. y may alias x. */
void gpt_cp_block_forward(const gpt_block_params *p, gpt_cp_acts *a, float *y, const float *x,
                          const gpt_cp_attention *attn, pl_stream *s);
/* dx [rows, C] (written) from dy [rows, C] after the record's forward, and the whole
 * sequence's parameter gradients accumulated (+=) into g on every rank of cp (one
 * all-reduce of p->count floats; none when cp has one rank or is NULL). dx must not alias
 * dy. The record is then free for the next forward. */
void gpt_cp_block_backward(const gpt_block_params *p, gpt_block_params *g, gpt_cp_acts *a, float *dx,
                           const float *dy, const gpt_cp_attention *attn, pl_comm *cp, pl_stream *s);

#ifdef __cplusplus
}
#endif

#endif
