// expect: pass broadcast.*.c262144
// expect-perf: broadcast.pipelined
// np: 3
/* Broken on purpose: the broadcast walks the chain with the whole buffer at once, one
 * message per link, so each rank waits for all of it before passing it on: n-1 full
 * transfers instead of n-2+k segments. Every output is right and every rank sends the
 * optimal S bytes; only the messages per link show it (handout section 3). */
#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream);

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (rank == root && sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    int pos = ring_peer(rank, -root, n);
    if (pos > 0) pl_recv(recvbuf, count, ring_peer(rank, -1, n), comm, stream);
    if (pos < n - 1) pl_send(pos == 0 ? sendbuf : recvbuf, count, ring_peer(rank, +1, n), comm, stream);
}
