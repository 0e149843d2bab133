// expect: wrong route.*
/* Broken on purpose: the gates are the router's probabilities of the chosen experts, not
 * renormalised to sum to 1 over the k chosen (with k = 1 the gate should be 1). */
#include "moe.h"
#define moe_route moe_route_solution
#include "../../../solutions/09-moe/moe_router.c"
#undef moe_route
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    moe_route_solution(c, logits, r);
    for (int a = 0; a < c->tokens * c->top_k; a++) r->gate[a] = r->probs[(size_t)(a / c->top_k) * c->experts + r->expert[a]];
}
