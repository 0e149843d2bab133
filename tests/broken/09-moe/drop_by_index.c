// expect: wrong route.*
/* Broken on purpose: over capacity, an expert keeps the first C tokens in batch order
 * (Megatron's "position" policy) instead of the C most probable ones. */
#include "moe.h"
#define moe_route moe_route_solution
#include "../../../solutions/09-moe/moe_router.c"
#undef moe_route
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    moe_route_solution(c, logits, r);
    int C = capacity(c), k = c->top_k;
    for (int e = 0; e < c->experts; e++)
        for (int t = 0, seen = 0; t < c->tokens; t++)
            for (int j = 0; j < k; j++)
                if (r->expert[t * k + j] == e) r->keep[t * k + j] = seen++ < C;
}
