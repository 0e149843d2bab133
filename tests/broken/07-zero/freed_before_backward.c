// expect: wrong traffic.z3n
/* Broken on purpose: with reshard_after_forward = false a unit's gathered parameters are
 * still freed after its forward, so its backward gathers them again: right results, one
 * all-gather of every unit too many. */
#define zero_post_forward zero_post_forward_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_post_forward
void zero_post_forward(zero_state *z, int u) {
    if (z->cfg.stage == 3) X(z)->u3[u].state = SHARDED; /* the bug: whatever the option says */
}
