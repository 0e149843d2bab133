// expect: wrong layer.*
/* Broken on purpose: moe_backward writes the experts' weight gradients (zeroes them first)
 * instead of adding to what the caller's buffers hold. Right when the caller passes zeros,
 * as a first step does; the grader's buffers hold earlier gradients. */
#include "moe.h"
#define moe_backward moe_backward_solution
#include "../../../solutions/09-moe/moe_layer.c"
#undef moe_backward
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_backward(const moe_config *c, const moe_weights *w, moe_weights *g, moe_state *st, const float *dy,
                  float daux, float *dx, pl_stream *s) {
    size_t n = (size_t)(c->experts / pl_comm_size(c->comm)) * (size_t)c->ffn * (size_t)c->hidden;
    pl_fill(g->w_gate, 0.0f, n, s); /* the bug: the caller's gradients are lost */
    pl_fill(g->w_up, 0.0f, n, s);
    pl_fill(g->w_down, 0.0f, n, s);
    moe_backward_solution(c, w, g, st, dy, daux, dx, s);
}
