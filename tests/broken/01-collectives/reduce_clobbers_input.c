// expect: wrong reduce.*
/* Broken on purpose: the reduce adds partial sums into the caller's sendbuf (casting the
 * const away) instead of a scratch buffer. The root's result is right on the first call,
 * but non-root inputs are modified: the driver's check that inputs are unchanged fails,
 * and so does every repeated call (warm-up, timing) that reuses those inputs. */
#define lab_reduce lab_reduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_reduce
void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream);

void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (rank == root && sendbuf != recvbuf)
        pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    int pos = ring_peer(rank, -root, n);
    int from = ring_peer(rank, +1, n), to = ring_peer(rank, -1, n);
    float *acc = pos == 0 ? recvbuf : (float *)sendbuf; /* the bug */
    float *incoming = pl_malloc_floats(count);
    if (pos < n - 1) {
        pl_recv(incoming, count, from, comm, stream);
        pl_reduce_local(acc, incoming, count, PL_SUM, stream);
    }
    if (pos > 0) pl_send(acc, count, to, comm, stream);
    pl_free(incoming);
}
