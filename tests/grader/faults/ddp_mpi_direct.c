// lab: 06-ddp
// expect: forbidden (build)
// speed: quick
/* Issue item 2 in Lab 6: gradient buckets are all-reduced with MPI_Allreduce directly, so
 * the harness never sees the traffic. The object checker refuses any MPI symbol. */
#include <mpi.h>

#include "pl.h"

static void direct_allreduce(const float *send, float *recv, size_t count, pl_op op, pl_comm *comm,
                             pl_stream *stream) {
    (void)op, (void)comm, (void)stream;
    MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
#define pl_allreduce direct_allreduce
#include "../../../solutions/06-ddp/ddp.c"
#undef pl_allreduce
