// expect: wrong overlap.z2
/* Broken on purpose: ZeRO-2 launches a bucket's reduce-scatter one unit late, when the
 * backward of the next bucket's first unit has already run (and the last bucket's in the
 * step): the results are right, but each reduce waits behind compute it could hide under. */
#define zero_post_backward zero_post_backward_solution
#define zero_step zero_step_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_post_backward
#undef zero_step
void zero_post_backward(zero_state *z, int u) {
    if (z->cfg.stage != 2) {
        zero_post_backward_solution(z, u);
        return;
    }
    /* the bug: the bucket whose last unit is u + 1 is reduced now */
    if (u + 1 < z->model->nunits) zero_post_backward_solution(z, u + 1);
}
void zero_step(zero_state *z) {
    if (z->cfg.stage == 2) zero_post_backward_solution(z, 0);
    zero_step_solution(z);
}
