// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 2: the ring all-reduce uses the library's all-reduce and records fake send
 * events through the internal pl_trace_record(), so the trace looks like a ring. The
 * object checker refuses it. */
#include "../../../common/internal/pl_instrument.h"

#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    pl_allreduce(sendbuf, recvbuf, count, PL_SUM, comm, stream);
    int n = pl_comm_size(comm);
    pl_trace_event e = {.kind = PL_OP_SEND, .peer = (pl_comm_rank(comm) + 1) % n, .comm_size = n,
                        .bytes = 2 * count * sizeof(float) * (size_t)(n - 1) / (size_t)n};
    pl_trace_record(&e);
}
