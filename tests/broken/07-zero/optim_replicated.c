// expect: wrong memory.z1
/* Broken on purpose: ZeRO-1 keeps the AdamW moments of the whole model on every rank (as
 * DDP does) and steps only its shard: the results are right, the memory is not sharded. */
#define zero_init zero_init_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_init
void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    zero_init_solution(z, m, cfg, comm, init);
    ext *x = X(z);
    if (cfg->stage == 3) return;
    pl_free(x->m), pl_free(x->v);
    x->m = zalloc(x->flat * 4, PL_MEM_OPTIM); /* the bug: flat, not this rank's shards */
    x->v = zalloc(x->flat * 4, PL_MEM_OPTIM);
}
