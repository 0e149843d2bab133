// expect: wrong route.k2.*
/* Broken on purpose: the load-balancing loss counts f_i as choices / T instead of
 * choices / (T k): with k = 2 the f_i sum to 2 and the loss is twice too large (its
 * gradient too). */
#include "moe.h"
#define moe_route moe_route_solution
#define moe_route_backward moe_route_backward_solution
#include "../../../solutions/09-moe/moe_router.c"
#undef moe_route
#undef moe_route_backward
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    moe_route_solution(c, logits, r);
    r->aux *= (float)c->top_k; /* f_i = choices / T */
}
void moe_route_backward(const moe_config *c, const moe_routing *r, const float *dgate, float daux, float *dlogits) {
    moe_route_backward_solution(c, r, dgate, daux * (float)c->top_k, dlogits);
}
