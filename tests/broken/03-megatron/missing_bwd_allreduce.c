// expect: wrong backward.nosp
/* Broken on purpose: the backward pass leaves out the all-reduce before the QKV layer
 * (the conjugate of f), so each rank's dx holds only its own heads' contribution. */
#include "pl.h"
static int broken_in_backward, broken_calls;
static void broken_allreduce(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    if (broken_in_backward && ++broken_calls == 2) { /* the second one: before QKV */
        if (sb != rb) pl_copy(rb, sb, n * sizeof(float), s);
        return;
    }
    pl_allreduce(sb, rb, n, op, c, s);
}
#define pl_allreduce broken_allreduce
#define mg_block_backward mg_block_backward_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_block_backward

void mg_block_backward(const mg_config *c, const mg_params *p, mg_params *g, mg_acts *a,
                       float *dx, const float *dy, pl_stream *s) {
    broken_in_backward = 1;
    broken_calls = 0;
    mg_block_backward_solution(c, p, g, a, dx, dy, s);
    broken_in_backward = 0;
}
