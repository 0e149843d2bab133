/* gpt_tp.h - the GPT-2 block of gpt.h split over a tensor-parallel group (Megatron-LM):
 * the stage of a 3D-parallel run holds its blocks this way (Lab 8).
 *
 * Same model, layouts and initialisation as gpt.h (weights [out x in], y = x W^T + b;
 * activations [T, b, C] sequence-major, N = T*b rows); tensor rank r of t holds:
 *     ln1, ln2 (w, b)   [C]                  replicated
 *     qkv.w  [3C/t, C]  master rows [r 3C/t, (r+1) 3C/t): the q | k | v of heads
 *                       [r H/t, (r+1) H/t) (column-parallel), qkv.b the same rows
 *     proj.w [C, C/t]   master columns [r C/t, (r+1) C/t) (row-parallel), proj.b [C] replicated
 *     fc1.w  [F/t, C]   master rows [r F/t, (r+1) F/t) (column-parallel), fc1.b the same rows
 *     fc2.w  [C, F/t]   master columns [r F/t, (r+1) F/t) (row-parallel), fc2.b [C] replicated
 * in gpt.h's storage order, in one allocation (gpt_block_params, its tensors pointing into
 * it). Forward: x [N, C] whole on every rank; each rank runs its heads and its slice of the
 * MLP; the two row-parallel outputs are all-reduced over the group (Megatron's g), then
 * their replicated bias and the residual are added. Backward: the two input gradients of
 * the column-parallel layers are all-reduced (Megatron's f). So 2 all-reduces of N*C floats
 * forward and 2 backward, none at t = 1; the replicated tensors' gradients come out equal
 * on every rank. The serial block (gpt.h, gpt_host.h) is the same function at t = 1.
 */
#ifndef GPT_TP_H
#define GPT_TP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpt.h"     // defines: gpt_config, gpt_block_params, gpt_block_tensor, gpt_phase
#include "pl_comm.h" // defines: pl_comm

#ifdef __cplusplus
extern "C" {
#endif

/* True when the block splits over t ranks (heads and ffn multiples of t, gpt_config_valid);
 * otherwise false with one line in why. */
bool gpt_tp_config_valid(const gpt_config *c, int t, char *why, size_t why_len);

/* Where one tensor of rank r's shard comes from: a block of the serial master tensor
 * (gpt_tensor), rows [row0, row0 + rows), columns [col0, col0 + cols). */
typedef struct {
    int64_t rows, cols;   /* the shard's shape                                          */
    int64_t row0, col0;   /* its top-left element in the master tensor                  */
    size_t offset;        /* floats from the start of the rank's allocation             */
    bool replicated;      /* every rank holds the whole tensor (layer norms, row biases) */
} gpt_tp_shard;

/* which: a gpt_block_tensor. */
gpt_tp_shard gpt_tp_block_shard(const gpt_config *c, int which, int t, int r);
size_t gpt_tp_block_count(const gpt_config *c, int t); /* floats of one rank's shards */
/* Point p's named tensors into base (gpt_tp_block_count floats, device or host), and set
 * p->base and p->count. */
void gpt_tp_block_view(gpt_block_params *p, float *base, const gpt_config *c, int t);
/* Rank r's shard of layer `layer` of the serial model, on the host: the bits gpt_host and
 * gpt_block_init give the same elements of the whole tensors. */
void gpt_tp_block_init_host(float *base, const gpt_config *c, int layer, int t, int r, uint64_t seed);
/* Rank r's shard out of whole host tensors (a gpt_block_params of gpt_host.h): dst holds
 * gpt_tp_block_count floats. The referee slices the serial run's parameters with it. */
void gpt_tp_block_slice_host(float *dst, const gpt_block_params *whole, const gpt_config *c, int t, int r);

/* What one block keeps for one micro-batch (one pl_malloc):
 *   4 * (N * (4C + 4C/t + 2F/t + 4) + b * (H/t) * T * T) bytes
 * (x, ln1, x1, ln2 [N, C]; att [N, C/t]; qkv [N, 3C/t]; fc1, gelu [N, F/t]; the attention
 * probabilities of its heads; the two layer norms' mean and rstd [N]). */
typedef struct gpt_tp_acts gpt_tp_acts;
size_t gpt_tp_acts_bytes(const gpt_config *c, int t);
gpt_tp_acts *gpt_tp_acts_alloc(const gpt_config *c, int t);
void gpt_tp_acts_free(gpt_tp_acts *a);

/* Temporaries of one call, shared by every block and micro-batch of a rank:
 * 4 * (N * (2C + C/t + 3C/t + F/t) + b * (H/t) * T * T) bytes. */
typedef struct gpt_tp_workspace gpt_tp_workspace;
size_t gpt_tp_workspace_bytes(const gpt_config *c, int t);
gpt_tp_workspace *gpt_tp_workspace_alloc(const gpt_config *c, int t);
void gpt_tp_workspace_free(gpt_tp_workspace *ws);

/* y [N, C] = block(x [N, C]) over the group tp (its size is the t everything was made
 * with; NULL means t = 1). y may alias x. Two all-reduces of N*C floats when t > 1. */
void gpt_tp_block_forward(const gpt_block_params *p, gpt_tp_acts *a, float *y, const float *x,
                          gpt_tp_workspace *ws, pl_comm *tp, pl_stream *s);
/* dx [N, C] (written) from dy [N, C], after the record's forward; every parameter
 * gradient accumulated (+=) into g (the same shard layout). dx must not alias dy. Two
 * all-reduces of N*C floats when t > 1. The record is then free for the next forward. */
void gpt_tp_block_backward(const gpt_block_params *p, gpt_block_params *g, gpt_tp_acts *a,
                           float *dx, const float *dy, gpt_tp_workspace *ws, pl_comm *tp,
                           pl_stream *s);

#ifdef __cplusplus
}
#endif

#endif
