/* lab03_ref.h - what Lab 3's referee files share (lab03.c: the masters, the serial block,
 * the config and block cases; lab03_train.c: the memory and training cases and the cost
 * model's table). Host arrays only: nothing here runs student code. */
#ifndef LAB03_REF_H
#define LAB03_REF_H

#include "lab03.h"

/* The master tensors of one block, Lab 3's layout ([in x out] weights, 1 x n vectors). */
typedef struct {
    float *t[LAB3_NTENSORS];
} host_block;

float *lab3_hz(size_t n); /* zeroed host floats */
void hb_alloc(host_block *h, int C, int F);
void hb_free(host_block *h);
/* Layer `layer`'s master tensors from `seed`: the bits mg_fill_master gives. */
void hb_master(host_block *h, int C, int F, int layer, uint64_t seed);
/* This rank's shards of a block, in mg_params' layout (lab3_layout's pieces). */
void hb_shards(const host_block *h, const lab3_piece *pc, float *base);
/* The serial block: y = block(x); with dy also dx and, if g, the gradients (+=). */
void lab3_reference(const lab3_cfg *k, const host_block *p, host_block *g, float *y, const float *x, float *dx,
                    const float *dy);
/* Error of tensor w's shard in `got` (mg_params' layout) against the master's slice; with
 * `old`, of got - old (an update). */
double lab3_shard_err(const float *got, const lab3_piece *pc, const host_block *want, int w, const float *old);
/* The shards mg_params_init built (slot `slot`, `layers` blocks end to end) against the
 * init seed's master, bit for bit, tensor by tensor. */
void lab3_check_init(drv_case *c, const char *slot, int layers, const lab3_piece *pc, size_t count);

#endif
