// expect: deadlock allreduce_ring.oop.c512
// np: 3
/* Broken on purpose: each ring step sends, then receives, without a group. Every rank
 * sends at the same time; a send completes only when the peer posts its receive, which it
 * does only after its own send completes: everyone waits forever (the watchdog fires). */
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
        pl_send(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc), next, comm, stream);
        pl_recv(incoming, rlen, prev, comm, stream); /* the bug: not grouped with the send */
        pl_reduce_local(recvbuf + chunk_offset(count, n, rc), incoming, rlen, PL_SUM, stream);
    }
    for (int s = 0; s < n - 1; s++) {
        int sc = ring_peer(rank, 1 - s, n), rc = ring_peer(rank, -s, n);
        pl_send(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc), next, comm, stream);
        pl_recv(recvbuf + chunk_offset(count, n, rc), chunk_size(count, n, rc), prev, comm, stream);
    }
    pl_free(incoming);
}
