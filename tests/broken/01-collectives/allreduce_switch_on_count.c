// expect: wrong allreduce.*.c16384
// np: 3
/* Broken on purpose: the switch compares the element count with LAB_ALLREDUCE_SMALL_BYTES
 * instead of the bytes (count * 4), so messages of 64 to 256 KiB still take recursive
 * doubling. Every result is right. */
#define lab_allreduce lab_allreduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce
void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    if (count < LAB_ALLREDUCE_SMALL_BYTES) /* the bug: elements, not bytes */
        lab_allreduce_rd(sendbuf, recvbuf, count, comm, stream);
    else
        lab_allreduce_ring(sendbuf, recvbuf, count, comm, stream);
}
