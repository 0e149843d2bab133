// expect: wrong allgather.*
// np: 2
/* Broken on purpose: lab_allgather issues its copies, sends and receives on the compute
 * stream whatever stream the caller gives it. After a device synchronisation every block is
 * in place, but the caller reads the result on its own stream without one (as the next
 * kernel of a framework would), and on a GPU that read runs before the blocks arrive. */
#define lab_allgather lab_allgather_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allgather
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm, pl_stream *stream);

void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm, pl_stream *stream) {
    (void)stream;
    lab_allgather_solution(sendbuf, recvbuf, sendcount, comm, NULL); /* the bug: the stream dropped */
}
