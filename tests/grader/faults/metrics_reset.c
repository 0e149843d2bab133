// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 2: the ring all-reduce uses the library's all-reduce and then clears the
 * counters that would show it (pl_metrics_reset, internal). The object checker refuses it;
 * the driver's own counters (kept where the student cannot reset them) would show the call. */
#include "../../../common/internal/pl_instrument.h"

#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    pl_allreduce(sendbuf, recvbuf, count, PL_SUM, comm, stream);
    pl_metrics_reset();
}
