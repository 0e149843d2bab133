// expect: wrong overlap.z*
// expect-message: waited for a reduce-scatter as soon as it was issued
/* Broken on purpose: each reduce-scatter is issued on the comm stream at the right moment,
 * and then the host waits for it ("so the buffer is safe to reuse"). Results and the order
 * of issue are right; but the next unit's backward starts only when the reduce-scatter
 * has ended, so nothing overlaps. The buffer's reuse needs a wait there, not here. */
#include "pl.h" /* declared first: the macros below replace only the solution's calls */
static void rs_waited(const float *send, float *recv, size_t count, pl_op op, pl_comm *c, pl_stream *s) {
    pl_reduce_scatter(send, recv, count, op, c, s);
    pl_stream_sync(s);
}
static void rs_bf16_waited(const uint16_t *send, uint16_t *recv, size_t count, pl_op op, pl_comm *c, pl_stream *s) {
    pl_reduce_scatter_bf16(send, recv, count, op, c, s);
    pl_stream_sync(s);
}
#define pl_reduce_scatter rs_waited
#define pl_reduce_scatter_bf16 rs_bf16_waited
#include "../../../solutions/07-zero/zero.c"
