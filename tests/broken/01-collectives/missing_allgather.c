// expect: wrong allreduce_ring.*
/* Broken on purpose: the ring all-reduce stops after the reduce-scatter phase, so each
 * rank holds the full sum of one chunk only and partial sums everywhere else. */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream);

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    float *incoming = pl_malloc_floats(chunk_size(count, n, 0));
    for (int s = 0; s < n - 1; s++) {
        int sc = ring_peer(rank, -s, n), rc = ring_peer(rank, -s - 1, n);
        size_t rlen = chunk_size(count, n, rc);
        pl_group_start();
        pl_send(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc), next, comm, stream);
        pl_recv(incoming, rlen, prev, comm, stream);
        pl_group_end();
        pl_reduce_local(recvbuf + chunk_offset(count, n, rc), incoming, rlen, PL_SUM, stream);
    }
    /* the bug: no all-gather phase */
    pl_free(incoming);
}
