// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 2: the ring all-reduce calls MPI directly (#include <mpi.h>), under the
 * harness's counters. The object checker refuses any MPI symbol in a student object. */
#include <mpi.h>

#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    (void)comm, (void)stream;
    MPI_Allreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
}
