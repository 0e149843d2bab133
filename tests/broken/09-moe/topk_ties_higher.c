// expect: wrong route.*
/* Broken on purpose: the top-k keeps the later expert of two with equal probability ('>='
 * where the handout's rule says ties go to the lower index). Random logits never tie; the
 * route.*.ties cases make the k-th and (k+1)-th probabilities of every token equal. */
#include "moe.h"
#define moe_route moe_route_solution
#include "../../../solutions/09-moe/moe_router.c"
#undef moe_route
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    int T = c->tokens, E = c->experts, k = c->top_k;
    moe_route_solution(c, logits, r); /* probabilities, capacity and the loss of the right choice... */
    for (int t = 0; t < T; t++) {
        const float *p = r->probs + (size_t)t * E;
        float chosen = 0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < j; q++) taken |= r->expert[t * k + q] == e;
                if (!taken && (best < 0 || p[e] >= p[best])) best = e; /* the bug: ties to the higher index */
            }
            r->expert[t * k + j] = best;
            chosen += p[best];
        }
        for (int j = 0; j < k; j++) r->gate[t * k + j] = p[r->expert[t * k + j]] / chosen;
    }
    /* ... then the choices changed: capacity again, expert by expert */
    int C = capacity(c);
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
