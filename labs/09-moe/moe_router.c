/* moe_router.c - Lab 9, part 1: the router on the host (README.md, "The router").
 *
 * Implement moe_route and moe_route_backward (moe.h has the math and every shape). Pure host
 * code on this rank's tokens: logits and every output are host arrays; no device call, no
 * communication (the grader fails a router that communicates).
 *   probs   softmax of each row of logits [T, E]
 *   expert  the k largest probs of each token, largest first, ties to the lower index
 *   gate    their probs divided by their sum
 *   keep    capacity C = (int)ceil((double)T * k / E * capacity_factor): for each expert, the
 *           C assignments with the largest prob stay (ties: lower token first), others are 0
 *   aux     aux_alpha * E * sum_i f_i P_i, f_i = choices of expert i before drops / (T k),
 *           P_i = mean of probs[:, i]
 * Allowed: the C library (malloc, qsort, expf, ...), PL_CHECK.
 *
 * Until you implement them they leave their outputs as they are, and the grader reports
 * the route.* cases (and every layer case) as wrong.
 */
#include "moe.h" // defines: moe_config, moe_routing

void moe_route(const moe_config *c, const float *logits, moe_routing *r) {
    (void)c, (void)logits, (void)r;
    /* TODO */
}

/* dlogits from dgate (0 for dropped assignments) and daux: through the renormalised gates
 * (g_j = p_j / S), the aux loss (d aux / d p[t,i] = aux_alpha E f_i / T), then the softmax. */
void moe_route_backward(const moe_config *c, const moe_routing *r, const float *dgate, float daux, float *dlogits) {
    (void)c, (void)r, (void)dgate, (void)daux, (void)dlogits;
    /* TODO */
}
