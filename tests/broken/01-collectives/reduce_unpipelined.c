// expect: pass reduce.*.c262144
// expect-perf: reduce.pipelined
// np: 3
/* Broken on purpose: the reduce walks the chain with whole buffers, receiving all of the
 * partial sum before adding its input and passing it on: every link idle until the one
 * before it has finished. Outputs and bytes are the pipelined chain's; the messages per
 * link are 1 (handout section 3). */
#define lab_reduce lab_reduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_reduce
void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream);

void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (rank == root && sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    int pos = ring_peer(rank, -root, n);
    int from = ring_peer(rank, +1, n), to = ring_peer(rank, -1, n);
    if (pos == n - 1) {
        pl_send(sendbuf, count, to, comm, stream);
        return;
    }
    float *partial = pl_malloc_floats(count);
    pl_recv(partial, count, from, comm, stream);
    if (pos == 0) {
        pl_reduce_local(recvbuf, partial, count, PL_SUM, stream);
    } else {
        pl_reduce_local(partial, sendbuf, count, PL_SUM, stream);
        pl_send(partial, count, to, comm, stream);
    }
    pl_free(partial);
}
