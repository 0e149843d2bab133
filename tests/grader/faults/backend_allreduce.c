// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 2: the ring all-reduce calls the comm backend's all-reduce through the
 * internal header (reached by a relative path: moving it off the include path is not what
 * stops this), so no public call is counted. The object checker refuses pl_cb: only the
 * functions of the public headers may be called. */
#include "../../../common/internal/pl_backend.h"

#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    pl_cb->allreduce(sendbuf, recvbuf, count, PL_SUM, comm, stream);
}
