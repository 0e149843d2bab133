// expect: wrong allreduce_rd.*
/* Broken on purpose: recursive doubling without the fold. Partners rank ^ mask that do
 * not exist are skipped, so with 3, 5, 6 or 7 ranks some ranks miss some inputs.
 * Powers of two (1, 2, 4, 8 ranks) still pass. */
#define lab_allreduce_rd lab_allreduce_rd_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_rd
void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                      pl_stream *stream);

void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                      pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    float *incoming = pl_malloc_floats(count);
    for (int mask = 1; mask < n; mask *= 2) {
        int partner = rank ^ mask;
        if (partner >= n) continue; /* the bug: that partner's share is simply lost */
        pl_group_start();
        pl_send(recvbuf, count, partner, comm, stream);
        pl_recv(incoming, count, partner, comm, stream);
        pl_group_end();
        pl_reduce_local(recvbuf, incoming, count, PL_SUM, stream);
    }
    pl_free(incoming);
}
