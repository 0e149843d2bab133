// expect: wrong traffic.bf16.z3f
/* Broken on purpose: the reduce-scatter's precision follows the stage, as the graded runs
 * of the handout's first draft paired them (ZeRO-2 in fp32, ZeRO-1 and ZeRO-3 in bf16),
 * instead of cfg.reduce_dtype: a ZeRO-3 run asking for an fp32 reduction gets bf16 on the
 * wire. */
#define zero_init zero_init_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_init
void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init);

void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    zero_config c = *cfg;
    if (c.param_dtype == ZERO_BF16) c.reduce_dtype = c.stage == 2 ? ZERO_FP32 : ZERO_BF16; /* the bug */
    zero_init_solution(z, m, &c, comm, init);
    z->cfg.reduce_dtype = cfg->reduce_dtype; /* what the caller sees, as it asked */
}
