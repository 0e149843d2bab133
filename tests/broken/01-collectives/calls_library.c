// expect: forbidden allgather.*
/* Broken on purpose: the all-gather calls the library collective instead of building it
 * from send/recv. The result is right; the instrumentation shows a collective call. */
#define lab_allgather lab_allgather_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allgather
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream);

void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream) {
    pl_allgather(sendbuf, recvbuf, sendcount, comm, stream); /* the bug */
}
