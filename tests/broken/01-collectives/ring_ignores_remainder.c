// expect: wrong allreduce_ring.*
/* Broken on purpose: the ring all-reduce cuts the buffer into n chunks of count/n and
 * forgets the remainder, so the last count % n elements are never summed. Counts that n
 * divides still pass; counts that it does not (and counts < n) fail. */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream);

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    size_t chunk = count / (size_t)n; /* the bug: count % n elements belong to no chunk */
    if (n == 1 || chunk == 0) return;
    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    float *incoming = pl_malloc_floats(chunk);
    for (int s = 0; s < n - 1; s++) {
        size_t sc = (size_t)ring_peer(rank, -s, n), rc = (size_t)ring_peer(rank, -s - 1, n);
        pl_group_start();
        pl_send(recvbuf + sc * chunk, chunk, next, comm, stream);
        pl_recv(incoming, chunk, prev, comm, stream);
        pl_group_end();
        pl_reduce_local(recvbuf + rc * chunk, incoming, chunk, PL_SUM, stream);
    }
    for (int s = 0; s < n - 1; s++) {
        size_t sc = (size_t)ring_peer(rank, 1 - s, n), rc = (size_t)ring_peer(rank, -s, n);
        pl_group_start();
        pl_send(recvbuf + sc * chunk, chunk, next, comm, stream);
        pl_recv(recvbuf + rc * chunk, chunk, prev, comm, stream);
        pl_group_end();
    }
    pl_free(incoming);
}
