// lab: 01-collectives
// expect: wrong allreduce_ring.*
// speed: quick
// sandbox: both
/* pl_info() used to return the harness's own state: setting its TF32 flag loosened every
 * tolerance 500 times. This all-reduce casts the const away, sets the flag and returns a
 * result off by one part in 10^4. pl_info() returns a copy now, and the tolerance is the
 * referee's (Lab 1's is exact anyway): wrong. */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    ((pl_runtime_info *)pl_info())->tf32 = 1;
    lab_allreduce_ring_solution(sendbuf, recvbuf, count, comm, stream);
    if (count) pl_scale(recvbuf, 1.0001f, count, stream);
}
