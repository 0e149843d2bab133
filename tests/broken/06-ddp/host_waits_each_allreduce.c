// expect: wrong overlap.overlap
// expect-message: backward's compute waited for a bucket's all-reduce
/* Broken on purpose: each bucket's all-reduce is launched on the comm stream at the right
 * moment, and then the host waits for it ("make sure it finished"). Results and issue
 * order are right; but backward's next GEMM starts only after the all-reduce ends, so
 * nothing overlaps. */
#include "pl.h" /* declared first: the macro below replaces only the solution's calls */
static void allreduce_and_wait(const float *sendbuf, float *recvbuf, size_t count, pl_op op, pl_comm *c, pl_stream *s) {
    pl_allreduce(sendbuf, recvbuf, count, op, c, s);
    pl_stream_sync(s);
}
#define pl_allreduce allreduce_and_wait
#include "../../../solutions/06-ddp/ddp.c"
