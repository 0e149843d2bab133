// expect: wrong ckpt.1to3
/* Broken on purpose: after a load, ZeRO-1/2 update only the rank's own slice of the full
 * parameters and skip the all-gather: the other slices keep the values they had before. */
#define zero_ckpt_loaded zero_ckpt_loaded_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_ckpt_loaded
void zero_ckpt_loaded(zero_state *z) {
    ext *x = X(z);
    if (z->cfg.stage == 3) {
        zero_ckpt_loaded_solution(z);
        return;
    }
    for (int b = 0; b < z->nbuckets && z->cfg.param_dtype == ZERO_BF16; b++) {
        const zero_bucket *bk = &z->bucket[b];
        kern_bf16_from_f32(at(x->params, bk->offset + (size_t)z->rank * bk->shard, 2), x->master + x->shard_off[b],
                           bk->shard, NULL);
    }
    /* the bug: no pl_allgather */
}
