// expect: wrong allgather.ip.*
/* Broken on purpose: the all-gather clears its output before placing its own block.
 * Out of place that is merely wasted work; in place (sendbuf == recvbuf + rank*sendcount)
 * it wipes the input before it is read, so every rank's block arrives as zeros. */
#define lab_allgather lab_allgather_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allgather
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream);

void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    float *mine = recvbuf + (size_t)rank * sendcount;
    pl_memset(recvbuf, 0, (size_t)n * sendcount * sizeof(float), stream); /* the bug */
    if (sendbuf != mine) pl_copy(mine, sendbuf, sendcount * sizeof(float), stream);
    if (n == 1 || sendcount == 0) return;
    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    for (int s = 0; s < n - 1; s++) {
        int send_block = ring_peer(rank, -s, n), recv_block = ring_peer(rank, -s - 1, n);
        pl_group_start();
        pl_send(recvbuf + (size_t)send_block * sendcount, sendcount, next, comm, stream);
        pl_recv(recvbuf + (size_t)recv_block * sendcount, sendcount, prev, comm, stream);
        pl_group_end();
    }
}
