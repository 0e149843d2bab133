// expect: wrong layer.*
// np: 2
/* Broken on purpose: the layer ignores the stream it is given and issues its forward and
 * backward on the compute stream. After a device synchronisation every output is in
 * place, but the caller reads them on its own stream, without one, and on a GPU that read
 * comes before the layer's last kernels. */
#include "moe.h"
#define moe_forward moe_forward_solution
#define moe_backward moe_backward_solution
#include "../../../solutions/09-moe/moe_layer.c"
#undef moe_forward
#undef moe_backward
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_forward(const moe_config *c, const moe_weights *w, moe_state *st, const float *x, float *y,
                 moe_routing *r, pl_stream *s) {
    (void)s;
    moe_forward_solution(c, w, st, x, y, r, NULL); /* the bug: the caller's stream dropped */
}

void moe_backward(const moe_config *c, const moe_weights *w, moe_weights *g, moe_state *st,
                  const float *dy, float daux, float *dx, pl_stream *s) {
    (void)s;
    moe_backward_solution(c, w, g, st, dy, daux, dx, NULL);
}
