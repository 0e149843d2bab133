// expect: wrong route.*
/* Broken on purpose: the capacity divides T k by E in integers before the factor, C =
 * ceil((T k / E) cf). The same whenever E divides T k; with E = 6 and a factor of 0.5 it
 * keeps fewer tokens per expert than ceil(T k / E cf). */
#include "moe.h"
#define moe_route moe_route_solution
#include "../../../solutions/09-moe/moe_router.c"
#undef moe_route
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    int T = c->tokens, E = c->experts, k = c->top_k;
    moe_route_solution(c, logits, r);
    int C = (int)ceil((double)(T * k / E) * c->capacity_factor); /* the bug: T k / E in integers */
    candidate *cand = malloc(((size_t)T * k + 1) * sizeof *cand);
    PL_CHECK(cand != NULL, "out of host memory");
    for (int e = 0; e < E; e++) {
        int m = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (r->expert[t * k + j] == e) cand[m++] = (candidate){r->probs[(size_t)t * E + e], t, j};
        qsort(cand, (size_t)m, sizeof *cand, by_priority);
        for (int i = 0; i < m; i++) r->keep[cand[i].t * k + cand[i].j] = i < C;
    }
    free(cand);
}
