// expect: wrong ckpt.bf16.*
/* Broken on purpose: zero_ckpt_loaded all-gathers this rank's slice of the parameters as
 * the fp32 code does, but in a bf16 run it forgets to round the loaded masters into that
 * slice first: the parameters every rank continues from are the ones zero_init built, not
 * the checkpoint's. */
#define zero_ckpt_loaded zero_ckpt_loaded_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_ckpt_loaded
void zero_ckpt_loaded(zero_state *z);

void zero_ckpt_loaded(zero_state *z) {
    if (z->cfg.param_dtype != ZERO_BF16 || z->cfg.stage == 3) {
        zero_ckpt_loaded_solution(z);
        return;
    }
    ext *x = X(z);
    for (int b = 0; b < z->nbuckets; b++) { /* the bug: no kern_bf16_from_f32 from the masters */
        const zero_bucket *bk = &z->bucket[b];
        void *buf = at(x->params, bk->offset, x->es), *own = at(buf, (size_t)z->rank * bk->shard, x->es);
        pl_allgather_bf16(own, buf, bk->shard, z->comm, NULL);
    }
}
