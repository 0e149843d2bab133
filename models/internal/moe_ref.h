/* moe_ref.h - the reference mixture-of-experts layer (Lab 9's serial model): plain loops
 * over host arrays in float64, no MPI, no device, nothing from kernels/ or pl_gemm, so the
 * grader and the tests compare the students' distributed layer with an independent
 * computation of the same math. Internal: the grader's referee and the tests use it; a
 * lab's code may not (its llm_ names are not in the public API).
 *
 * The layer, for a group of T tokens x [T, H] (a rank's tokens; the whole batch is G
 * groups, and everything below except the experts is per group):
 *   logits = x Wr^T                 Wr [E, H]
 *   p      = softmax(logits)        per token, over the E experts
 *   top-k  experts e_0, .., e_{k-1} of p, largest first, ties to the lower index
 *   gates  g_j = p[e_j] / sum_j' p[e_j']            (renormalised over the k chosen)
 *   capacity C = ceil(T * k / E * capacity_factor)  per expert and group
 *   keep   per expert, the C assignments (t, j) with the largest p[t, e]; ties to the
 *          lower token, then lower j; the rest are dropped (contribute nothing)
 *   y[t]   = sum_j keep[t,j] g_j FFN_{e_j}(x[t]),   FFN_e(x) = (silu(x Wg_e^T) * (x Wu_e^T)) Wd_e^T
 *   aux    = alpha * E * sum_i f_i P_i,  f_i = (assignments to i before drops) / (T k),
 *            P_i = mean over the T tokens of p[t, i]    (the Switch load-balancing loss)
 * Backward from dy [T, H] and daux (the loss is sum_t <dy_t, y_t> + daux * sum_groups aux):
 * f_i is a count (no gradient); dWr is summed over the tokens given.
 */
#ifndef MOE_REF_H
#define MOE_REF_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int tokens;   /* T: tokens in one group (a rank's)          */
    int hidden;   /* H                                          */
    int ffn;      /* F                                          */
    int experts;  /* E                                          */
    int top_k;    /* k: 1 or 2 (any k <= E works here)          */
    double capacity_factor, aux_alpha;
} llm_moe_shape;

/* ceil(T * k / E * capacity_factor), evaluated in that order in double. */
int llm_moe_capacity(const llm_moe_shape *s);

/* The routing of one group. */
typedef struct {
    double *probs;  /* [T, E] */
    int *expert;    /* [T, k] */
    double *gate;   /* [T, k] */
    int *keep;      /* [T, k] 1 kept, 0 dropped */
    double aux;
} llm_moe_routing;
void llm_moe_routing_alloc(llm_moe_routing *r, const llm_moe_shape *s);
void llm_moe_routing_free(llm_moe_routing *r);

/* Route one group from its logits [T, E]. */
void llm_moe_route(const llm_moe_shape *s, const double *logits, llm_moe_routing *r);
/* dlogits [T, E] (written) from dgate [T, k] and daux. */
void llm_moe_route_backward(const llm_moe_shape *s, const llm_moe_routing *r, const double *dgate, double daux,
                            double *dlogits);

/* One expert on m rows: y [m, H] = FFN(x [m, H]) with wg, wu [F, H], wd [H, F]. */
void llm_moe_expert_forward(int m, int H, int F, const double *wg, const double *wu, const double *wd,
                            const double *x, double *y);
/* Accumulates dwg, dwu, dwd (+=) and writes dx [m, H] from dy [m, H]. */
void llm_moe_expert_backward(int m, int H, int F, const double *wg, const double *wu, const double *wd,
                             const double *x, const double *dy, double *dx, double *dwg, double *dwu, double *dwd);

/* The whole layer over G groups of s->tokens tokens: x, y, dy, dx [G*T, H]; wr [E, H];
 * wg, wu [E, F, H]; wd [E, H, F]. rt[G] receives every group's routing (allocated by the
 * caller with llm_moe_routing_alloc). Backward: dwr [G, E, H] is each group's own
 * contribution; the expert gradients are summed over every group; all written (=). */
void llm_moe_forward(const llm_moe_shape *s, int G, const double *x, const double *wr, const double *wg,
                     const double *wu, const double *wd, double *y, llm_moe_routing *rt);
void llm_moe_backward(const llm_moe_shape *s, int G, const double *x, const double *wr, const double *wg,
                      const double *wu, const double *wd, const llm_moe_routing *rt, const double *dy, double daux,
                      double *dx, double *dwr, double *dwg, double *dwu, double *dwd);

#ifdef __cplusplus
}
#endif

#endif
