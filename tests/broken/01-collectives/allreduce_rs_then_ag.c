// expect: full allreduce.*.c16384 allreduce.*.c262144
// np: 2 3
/* A correct alternative: above the switch, lab_allreduce is the student's own ring
 * reduce-scatter into a scratch block followed by the ring all-gather (when the count
 * divides into the ranks; the ring otherwise): 2(n-1) messages per rank and the ring's
 * bytes, written differently from the reference. It keeps every allreduce point. */
#define lab_allreduce lab_allreduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce
void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    size_t n = (size_t)pl_comm_size(comm);
    if (count * sizeof(float) < LAB_ALLREDUCE_SMALL_BYTES) {
        lab_allreduce_rd(sendbuf, recvbuf, count, comm, stream);
        return;
    }
    if (count % n != 0) {
        lab_allreduce_ring(sendbuf, recvbuf, count, comm, stream);
        return;
    }
    size_t block = count / n;
    float *mine = pl_malloc_floats(block);
    lab_reduce_scatter(sendbuf, mine, block, comm, stream);
    lab_allgather(mine, recvbuf, block, comm, stream);
    pl_stream_sync(stream);
    pl_free(mine);
}
