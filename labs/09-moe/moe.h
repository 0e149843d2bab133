/* moe.h - Lab 9: expert parallelism and one-sided communication (do not edit; you implement
 * the functions declared below in moe_router.c, moe_layer.c and moe_allreduce.c).
 *
 * A mixture-of-experts (MoE) layer over the n ranks of a communicator (the expert-parallel
 * group). Every rank holds T tokens of its own; the E experts are spread E/n per rank, rank r
 * owning the global experts [r*E/n, (r+1)*E/n) ("local expert l" of rank r is global expert
 * r*E/n + l). Each token goes to its top-k experts, wherever they live, and comes back.
 *
 * Shapes (row-major, float32 unless said otherwise; T = tokens, H = hidden, F = ffn,
 * E = experts, k = top_k, n = ranks, Le = E/n local experts):
 *   x, y, dy, dx      [T, H]            this rank's tokens (device)
 *   router            [E, H]            replicated on every rank: logits = x router^T
 *   w_gate, w_up      [Le, F, H]        this rank's experts, one [F, H] matrix each
 *   w_down            [Le, H, F]
 *   logits, probs     [T, E]            (host)
 *   expert, keep      [T, k] int        (host)  expert[t*k + j]: the j-th choice of token t
 *   gate              [T, k]            (host)
 *
 * The math (README.md has it with pictures, and what the grader checks):
 *   probs   = softmax(logits) per token
 *   expert  = the k largest probs, largest first, ties to the lower expert index
 *   gate    = probs of the chosen experts, renormalised to sum to 1 over the k
 *   C       = (int)ceil((double)T * k / E * capacity_factor)   per expert, on each rank
 *   keep    for each expert, the C assignments (t, j) with the largest prob; ties to the lower
 *           token. The others are dropped: they contribute nothing
 *   y[t]    = sum_j keep * gate * FFN_e(x[t]),   FFN_e(x) = (silu(x Wg^T) * (x Wu^T)) Wd^T
 *   aux     = aux_alpha * E * sum_i f_i * P_i   over this rank's tokens: f_i = (choices of
 *           expert i, before drops) / (T k), P_i = mean of probs[:, i]   (Switch Transformer)
 * Backward: the loss is sum_t <dy_t, y_t> + daux * aux (f_i is a count: no gradient).
 */
#ifndef LAB09_MOE_H
#define LAB09_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "pl.h"

enum {
    MOE_OK = 0,
    MOE_ERR_SHAPE = 1,    /* tokens < 0, hidden < 1, ffn < 1 or experts < 1          */
    MOE_ERR_TOPK = 2,     /* top_k not 1 or 2, or top_k > experts                     */
    MOE_ERR_CAPACITY = 3, /* capacity_factor <= 0 (or not a number)                   */
    MOE_ERR_EXPERTS = 4,  /* experts not a multiple of the ranks                      */
    MOE_ERR_MISMATCH = 5, /* the ranks disagree on a field (hidden sizes that differ) */
};

typedef struct {
    int tokens;            /* T: this rank's tokens (every rank the same)       */
    int hidden;            /* H                                                  */
    int ffn;               /* F: each expert's inner width                      */
    int experts;           /* E: over all ranks                                  */
    int top_k;             /* k: 1 or 2                                          */
    float capacity_factor; /* > 0                                                */
    float aux_alpha;       /* alpha of the load-balancing loss (1e-2 usually)    */
    pl_comm *comm;         /* the expert-parallel group: the world in this lab  */
} moe_config;

/* A token's routing on the host (arrays the caller allocates, sizes above). */
typedef struct {
    float *probs;  /* [T, E]                                 */
    int *expert;   /* [T, k]                                 */
    float *gate;   /* [T, k]                                 */
    int *keep;     /* [T, k]  1 kept, 0 dropped by capacity  */
    float aux;     /* this rank's load-balancing loss        */
} moe_routing;

/* The layer's parameters on this rank, or their gradients (device). */
typedef struct {
    float *router; /* [E, H]      */
    float *w_gate; /* [Le, F, H]  */
    float *w_up;   /* [Le, F, H]  */
    float *w_down; /* [Le, H, F]  */
} moe_weights;

typedef enum { MOE_TWO_SIDED = 0, MOE_ONE_SIDED = 1 } moe_dispatcher;

/* What your layer keeps between calls and from forward to backward (you define it). */
typedef struct moe_state moe_state;
/* The symmetric buffers of your small all-reduce (you define it). */
typedef struct moe_ar moe_ar;

/* ===================================================================================== */
/* What you implement                                                                    */
/* ===================================================================================== */

/* ---- moe_router.c: no device, no communication ---------------------------------------- */

/* The routing of this rank's T tokens from their logits [T, E] (host), into r. */
void moe_route(const moe_config *c, const float *logits, moe_routing *r);

/* dlogits [T, E] (host, written) from r (moe_route's), dgate [T, k] (the gradient of the
 * loss with respect to each gate; 0 for dropped assignments) and daux. */
void moe_route_backward(const moe_config *c, const moe_routing *r, const float *dgate, float daux,
                        float *dlogits);

/* ---- moe_layer.c ---------------------------------------------------------------------- */

/* MOE_OK or one error, the same code on every rank of c->comm: MOE_ERR_MISMATCH when the
 * ranks' fields differ, else the first of the list above (SHAPE, TOPK, CAPACITY, EXPERTS).
 * Collective: compare the fields over the ranks first (library collectives are allowed
 * here), so that a rank with different sizes makes every rank fail instead of hanging. */
int moe_config_check(const moe_config *c);

/* All-to-all-v from point-to-point calls (Lab 1's tools: pl_send, pl_recv, groups, pl_copy).
 * send holds n blocks back to back, block p (send_counts[p] floats) for rank p; recv gets n
 * blocks back to back, block p (recv_counts[p] floats) from rank p. Counts are host arrays
 * of n; a rank's own block is a local copy. No library collective. */
void moe_alltoallv(const float *send, const int *send_counts, float *recv, const int *recv_counts,
                   pl_comm *comm, pl_stream *s);

/* Collective. Everything the layer needs to keep: buffers sized for the worst routing
 * (symmetric ones, pl_sym_malloc, for MOE_ONE_SIDED), signal counters, saved activations. */
moe_state *moe_state_create(const moe_config *c, moe_dispatcher d);
void moe_state_free(moe_state *st); /* collective */

/* y [T, H] = the layer on this rank's tokens x [T, H]; the routing into r (host arrays).
 * Tokens go to their experts' ranks and back:
 *   MOE_TWO_SIDED: per-expert counts by moe_alltoallv, then the rows by moe_alltoallv, and
 *                  back by moe_alltoallv; no pl_sym_* call.
 *   MOE_ONE_SIDED: per-expert counts by puts into every rank's count table, then each rank
 *                  puts its rows at offsets a prefix sum gives into the receivers'
 *                  symmetric buffers and signals; back the same way; no pl_send/pl_recv and
 *                  no library collective.
 * README.md gives the exact traffic the grader counts for each. */
void moe_forward(const moe_config *c, const moe_weights *w, moe_state *st, const float *x, float *y,
                 moe_routing *r, pl_stream *s);

/* dx [T, H] (written) from dy [T, H], after moe_forward on the same state. Gradients are
 * ACCUMULATED into g (+=; the caller zeroes them): the experts' over every token routed to
 * them from any rank, the router's over this rank's tokens only. The same exchanges as the
 * forward, reversed, with no counts. */
void moe_backward(const moe_config *c, const moe_weights *w, moe_weights *g, moe_state *st,
                  const float *dy, float daux, float *dx, pl_stream *s);

/* ---- moe_allreduce.c: small all-reduce on symmetric memory ----------------------------- */

/* Collective over the world (symmetric memory spans the world): buffers for up to max_count
 * floats. Needs pl_sym_peer_ptr (ranks on one node). */
moe_ar *moe_ar_create(size_t max_count, pl_comm *comm);
void moe_ar_free(moe_ar *a); /* collective */

/* out[i] = sum over ranks of in[i], summed in rank order: ((in_0 + in_1) + in_2) + ...
 * (bit for bit: the grader's reference adds in that order). in == out is allowed. Safe to
 * call back to back with new data: no rank may overwrite a buffer a peer still reads.
 *   oneshot: every rank reads every rank's input and reduces all of it;
 *   twoshot: rank r reduces chunk r (count/n elements, the first count%n chunks one more) by
 *            reading every rank's chunk r, writes the result into every rank's output
 *            buffer (peer stores or puts), then every rank copies out. */
void moe_allreduce_oneshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s);
void moe_allreduce_twoshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s);

#endif
