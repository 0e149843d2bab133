/* moe_layer.c - Lab 9, parts 2 to 4: moe_config_check, the all-to-all-v, and the layer with
 * its two dispatchers (moe.h: the API and every shape; README.md: the layout, the protocol
 * and the exact traffic the grader counts).
 *
 * Allowed harness calls:
 *   pl_send, pl_recv, pl_group_start/end             the all-to-all-v (two-sided)
 *   pl_sym_malloc/free, pl_sym_put(_nbi), pl_sym_put_signal, pl_sym_signal,
 *   pl_sym_wait_until, pl_sym_fence, pl_sym_quiet, pl_sym_barrier   (one-sided)
 *   pl_allreduce                                      moe_config_check only
 *   pl_malloc(_floats), pl_free, pl_upload, pl_download, pl_copy, pl_memset, pl_fill,
 *   pl_stream_sync, pl_gemm, pl_comm_rank/size
 *   kern_gather_rows, kern_moe_scatter/gather/rowdot, kern_swiglu_forward/backward
 *   moe_route, moe_route_backward (yours, moe_router.c)
 *
 * Until you implement them the functions do nothing (outputs stay poisoned) and the grader
 * reports the cases as wrong; nothing hangs.
 */
#include <stdlib.h>

#include "kern_gather.h" // defines: kern_gather_rows
#include "kern_moe.h"    // defines: kern_moe_scatter, kern_moe_gather, kern_moe_rowdot
#include "kern_swiglu.h" // defines: kern_swiglu_forward, kern_swiglu_backward
#include "moe.h"

/* Yours: buffers, counts, the routing and activations forward keeps for backward, and (one-
 * sided) the symmetric buffers and signal counters. */
struct moe_state {
    moe_config c;
    moe_dispatcher d;
};

/* Compare the fields over the ranks first (pl_allreduce of max and of -x), then check. */
int moe_config_check(const moe_config *c) {
    (void)c;
    /* TODO */
    return MOE_OK;
}

/* Pairwise exchange: step i sends to rank me+i and receives from me-i in one group. */
void moe_alltoallv(const float *send, const int *send_counts, float *recv, const int *recv_counts, pl_comm *comm,
                   pl_stream *s) {
    (void)send, (void)send_counts, (void)recv, (void)recv_counts, (void)comm, (void)s;
    /* TODO */
}

moe_state *moe_state_create(const moe_config *c, moe_dispatcher d) {
    moe_state *st = calloc(1, sizeof *st);
    PL_CHECK(st != NULL, "out of host memory");
    st->c = *c, st->d = d;
    /* TODO: buffers for the worst routing; MOE_ONE_SIDED: pl_sym_malloc the count table, the
     * receive and return buffers and a signal word per phase */
    return st;
}

void moe_state_free(moe_state *st) {
    /* TODO: free what moe_state_create allocated (pl_sym_free is collective) */
    free(st);
}

/* Router (logits on the device, routing on the host), counts, dispatch, experts, combine. */
void moe_forward(const moe_config *c, const moe_weights *w, moe_state *st, const float *x, float *y, moe_routing *r,
                 pl_stream *s) {
    (void)c, (void)w, (void)st, (void)x, (void)y, (void)r, (void)s;
    /* TODO */
}

/* The same exchanges reversed: gate * dy to the experts, their input gradients back. */
void moe_backward(const moe_config *c, const moe_weights *w, moe_weights *g, moe_state *st, const float *dy, float daux,
                  float *dx, pl_stream *s) {
    (void)c, (void)w, (void)g, (void)st, (void)dy, (void)daux, (void)dx, (void)s;
    /* TODO */
}
