// expect: wrong allreduce_ring.*
/* Broken on purpose: the ring all-reduce treats each chunk's end as inclusive, so every
 * chunk is one element short and its last element is never reduced or gathered. */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream);

static size_t short_chunk(size_t count, int n, int c) {
    size_t len = chunk_size(count, n, c);
    return len > 0 ? len - 1 : 0; /* the bug: last = first + len - 1 taken as the end */
}

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    float *incoming = pl_malloc_floats(chunk_size(count, n, 0));
    for (int s = 0; s < n - 1; s++) {
        int sc = ring_peer(rank, -s, n), rc = ring_peer(rank, -s - 1, n);
        pl_group_start();
        pl_send(recvbuf + chunk_offset(count, n, sc), short_chunk(count, n, sc), next, comm, stream);
        pl_recv(incoming, short_chunk(count, n, rc), prev, comm, stream);
        pl_group_end();
        pl_reduce_local(recvbuf + chunk_offset(count, n, rc), incoming, short_chunk(count, n, rc),
                        PL_SUM, stream);
    }
    for (int s = 0; s < n - 1; s++) {
        int sc = ring_peer(rank, 1 - s, n), rc = ring_peer(rank, -s, n);
        pl_group_start();
        pl_send(recvbuf + chunk_offset(count, n, sc), short_chunk(count, n, sc), next, comm, stream);
        pl_recv(recvbuf + chunk_offset(count, n, rc), short_chunk(count, n, rc), prev, comm, stream);
        pl_group_end();
    }
    pl_free(incoming);
}
