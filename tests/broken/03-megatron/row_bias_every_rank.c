// expect: wrong forward.nosp
/* Broken on purpose: each rank adds the row layers' biases to its partial sum before the
 * all-reduce, so the reduced output carries tp copies of each bias. (Done here by scaling
 * the biases by tp around the solution's forward: the same numbers.) */
#define mg_block_forward mg_block_forward_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_block_forward

void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y,
                      const float *x, pl_stream *s) {
    float tp = (float)pl_comm_size(c->tp);
    pl_scale(p->proj_b, tp, (size_t)c->hidden, s);
    pl_scale(p->fc2_b, tp, (size_t)c->hidden, s);
    mg_block_forward_solution(c, p, a, y, x, s);
    pl_scale(p->proj_b, 1.0f / tp, (size_t)c->hidden, s);
    pl_scale(p->fc2_b, 1.0f / tp, (size_t)c->hidden, s);
}
