// expect: wrong broadcast.*
/* Broken on purpose: the broadcast always starts the chain at rank 0, whatever the root.
 * Caught in place with a root other than 0: rank 0's buffer is then an output, poisoned
 * before the call, and that poison is what everyone receives. (Out of place the driver
 * gives every rank the root's data in sendbuf, so those cases still pass.) */
#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream);

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)root; /* the bug */
    lab_broadcast_solution(sendbuf, recvbuf, count, 0, comm, stream);
}
