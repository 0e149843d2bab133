/* context.c - Lab 10: context parallelism (context.h: the API and every shape; README.md:
 * the online softmax, the ring, the load balance, Ulysses, and what the grader counts).
 *
 * Allowed harness calls:
 *   pl_send, pl_recv, pl_group_start/end            the ring and the all-to-alls
 *   pl_comm_split, pl_comm_free                      the 2-D grid's rows and columns
 *   pl_allreduce                                     cp_config_check only
 *   pl_malloc(_floats), pl_free, pl_upload, pl_download, pl_copy, pl_memset, pl_fill,
 *   pl_stream_sync, pl_comm_rank/size
 *   kern_flash_block, kern_flash_merge, kern_flash_block_backward, kern_gather_rows
 *
 * Until you implement them the functions do nothing (outputs stay poisoned) and the grader
 * reports the cases as wrong; nothing hangs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kern_flash.h"  // defines: kern_flash_block, kern_flash_merge
#include "kern_gather.h" // defines: kern_gather_rows

/* 1. The online-softmax merge, on the host. Subtract the larger lse before exponentiating. */
void cp_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d) {
    (void)o, (void)lse, (void)o_blk, (void)lse_blk, (void)rows, (void)d;
    /* TODO */
}

/* 2. Chunk c of C has S / C tokens, one more for the first S % C; contiguous: rank r holds
 *    chunk r; zig-zag: chunks r and 2n - 1 - r, in that order. */
int cp_positions(const cp_config *c, int rank, int *pos) {
    (void)c, (void)rank, (void)pos;
    /* TODO */
    return 0;
}

/* 3. Compare the fields over the ranks first (pl_allreduce of max and of -x), then check. */
int cp_config_check(const cp_config *c, int ulysses) {
    (void)c, (void)ulysses;
    /* TODO */
    return CP_OK;
}

/* 4. Ring attention: n steps; in step t compute against the block of rank (me - t) mod n
 *    after posting the exchange of the next one (send what you hold to me + 1, receive
 *    from me - 1, K and V, in one group); skip chunk pairs above the causal diagonal. */
void cp_ring_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o, float *lse,
                     pl_stream *s) {
    (void)c, (void)q, (void)k, (void)v, (void)o, (void)lse, (void)s;
    /* TODO */
}

/* 5. The ring's backward: the K/V blocks travel again, each with its dk/dv accumulator;
 *    receive the accumulator of the block you hold from me - 1, add your share
 *    (kern_flash_block_backward with the forward's lse), send it on; one last exchange
 *    brings every block's dk/dv home. */
void cp_ring_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *dout, float *dq, float *dk, float *dv, pl_stream *s) {
    (void)c, (void)q, (void)k, (void)v, (void)o, (void)lse, (void)dout, (void)dq, (void)dk, (void)dv, (void)s;
    /* TODO */
}

/* 6. Ulysses: all-to-all q, k, v from [Sl, H, d] to [S, H/n, d], attention over the whole
 *    sequence on your heads, all-to-all o back. */
void cp_ulysses_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o,
                        pl_stream *s) {
    (void)c, (void)q, (void)k, (void)v, (void)o, (void)s;
    /* TODO */
}

/* 7. Ulysses' backward: q, k, v, dout to the head split; recompute (o, lse) of your heads
 *    with kern_flash_block; kern_flash_block_backward; dq, dk, dv back. */
void cp_ulysses_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *dout,
                         float *dq, float *dk, float *dv, pl_stream *s) {
    (void)c, (void)q, (void)k, (void)v, (void)dout, (void)dq, (void)dk, (void)dv, (void)s;
    /* TODO */
}

/* 8. 2-D: Ulysses within rows of u consecutive ranks (split a communicator per row and per
 *    column), the ring over the rows' gathered blocks within each column, Ulysses back. */
void cp_usp_forward(const cp_config *c, int u, const float *q, const float *k, const float *v, float *o,
                    pl_stream *s) {
    (void)c, (void)u, (void)q, (void)k, (void)v, (void)o, (void)s;
    /* TODO */
}

/* 9. The 2-D backward: to the row's head split (q, k, v, dout), recompute (o, lse) with the
 *    column's ring, the column's ring backward, back (dq, dk, dv). */
void cp_usp_backward(const cp_config *c, int u, const float *q, const float *k, const float *v, const float *dout,
                     float *dq, float *dk, float *dv, pl_stream *s) {
    (void)c, (void)u, (void)q, (void)k, (void)v, (void)dout, (void)dq, (void)dk, (void)dv, (void)s;
    /* TODO */
}
