// expect: wrong memory.z3
/* Broken on purpose: reshard_after_forward is ignored and every unit keeps its gathered
 * parameters from its forward to its backward: ZeRO-2's memory (and one all-gather fewer
 * per unit) where ZeRO-3 was asked for. */
#define zero_init zero_init_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_init
void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    zero_config c = *cfg;
    c.reshard_after_forward = false; /* the bug */
    zero_init_solution(z, m, &c, comm, init);
}
