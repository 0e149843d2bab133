// lab: 01-collectives
// expect: deadlock broadcast.*
// speed: quick
// np: 3
// full: reduce allgather reduce_scatter allreduce_ring allreduce_rd allreduce reduce.bytes reduce.pipelined allgather.bytes reduce_scatter.bytes allreduce_ring.bytes allreduce_rd.msgs allreduce_ring.speed
/* Issue item 7, an honest mistake: only the broadcast deadlocks (every rank but the root
 * receives before anyone sends - and so does the root). Protocol 1 gave up the whole world
 * size after three hangs in a row and zeroed Lab 1. Now three deadlocks in a row give up
 * the broadcast group only; every other group keeps its full points. */
#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (n > 1 && count > 0) pl_recv(recvbuf, count, (rank + n - 1) % n, comm, stream); /* the bug */
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
