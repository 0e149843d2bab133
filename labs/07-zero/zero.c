/* zero.c - Lab 7: sharded data parallelism. THE FILE YOU EDIT.
 *
 * Implement the functions declared in zero.h (read it, and README.md, first), in this order:
 *   1. the layouts: zero_buckets (ZeRO-1/2's flat buckets, padded to a multiple of the
 *      world size) and zero_chunk (ZeRO-3's dim-0 chunks, torch.chunk + padding);
 *   2. ZeRO-1: zero_init keeps full parameters and gradients in the buckets and this rank's
 *      shard of the optimizer state; zero_step reduce-scatters, clips by the global norm,
 *      runs AdamW on the shard and all-gathers the parameters; zero_pieces;
 *   3. ZeRO-2: the gradients of a bucket go to a transient buffer and are reduce-scattered
 *      on the comm stream as soon as the bucket is complete (zero_post_backward);
 *   4. ZeRO-3: sharded parameters, gathered unit by unit with prefetch, resharded after the
 *      forward, each unit's gradient reduce-scattered at once;
 *   5. bf16 mixed precision (param_dtype, reduce_dtype);
 *   6. checkpoints: zero_ckpt_plan (the resharding) and zero_ckpt_loaded.
 * Shapes and rules: zero.h. Tag every buffer you keep with its category (pl_malloc_tagged).
 */
#include <string.h>

#include "zero.h"

int zero_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max) {
    (void)m, (void)cap, (void)world, (void)out, (void)max;
    return ZERO_ERR_TODO;
}

size_t zero_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held) {
    (void)dim0, (void)world, (void)rank;
    *first = *held = 0;
    return 0; /* TODO */
}

void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    memset(z, 0, sizeof *z);
    z->cfg = *cfg;
    z->model = m;
    z->comm = comm;
    z->rank = pl_comm_rank(comm);
    z->world = pl_comm_size(comm);
    (void)init;
    /* TODO: layouts, and the buffers this stage keeps (tagged) */
}

const void *zero_pre_forward(zero_state *z, int u) {
    (void)z, (void)u;
    return NULL; /* TODO: unit u's full parameters */
}

void zero_post_forward(zero_state *z, int u) {
    (void)z, (void)u; /* TODO */
}

const void *zero_pre_backward(zero_state *z, int u, void **grad) {
    (void)z, (void)u;
    *grad = NULL;
    return NULL; /* TODO: unit u's full parameters, and where the kit writes its gradient */
}

void zero_post_backward(zero_state *z, int u) {
    (void)z, (void)u; /* TODO */
}

void zero_step(zero_state *z) {
    (void)z; /* TODO: reduce (ZeRO-1), clip, AdamW on the shard, gather (ZeRO-1/2) */
}

void zero_free(zero_state *z) {
    (void)z; /* TODO */
}

int zero_pieces(const zero_state *z, zero_piece *out, int max) {
    (void)z, (void)out, (void)max;
    return ZERO_ERR_TODO;
}

int zero_ckpt_plan(const zero_piece *mine, int nmine, const zero_saved_piece *saved, int nsaved, zero_read *out,
                   int max) {
    (void)mine, (void)nmine, (void)saved, (void)nsaved, (void)out, (void)max;
    return ZERO_ERR_TODO;
}

void zero_ckpt_loaded(zero_state *z) {
    (void)z; /* TODO */
}
