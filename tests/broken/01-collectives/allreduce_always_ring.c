// expect: wrong allreduce.*.c1638[34]
// np: 3
/* Broken on purpose: lab_allreduce never switches, it always runs the ring. Every result is
 * right; small messages pay 2(n-1) latencies where recursive doubling pays ceil(log2 n), and
 * the grader counts the messages of each size's choice. */
#define lab_allreduce lab_allreduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce
void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    lab_allreduce_ring(sendbuf, recvbuf, count, comm, stream); /* the bug: no choice by size */
}
