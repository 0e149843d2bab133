// expect: pass train.z3 train.z1
// expect-perf: freed
/* Broken on purpose: a leak in ZeRO-3's teardown. zero_free gives back the flat buffers and
 * each unit's parameters and gradients, but not the AdamW moments of each unit's shard
 * (m and v of every unit3): a freed-state list written for stage 1 and 2 and never grown
 * for the per-unit buffers of stage 3. Every result is right; the per-case leak check
 * reports the bytes and the line that allocated them. */
#define zero_free zero_free_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_free

void zero_free(zero_state *z) {
    ext *x = X(z);
    for (int u = 0; x && z->cfg.stage == 3 && u < z->model->nunits; u++) x->u3[u].m = x->u3[u].v = NULL;
    zero_free_solution(z);
}
