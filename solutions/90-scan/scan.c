/* scan.c - Lab 90, solved: recursive doubling (Hillis-Steele). */
#include "scan.h"

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (count == 0) return;
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    float *tmp = n > 1 ? pl_malloc_floats(count) : NULL;
    for (int d = 1; d < n; d *= 2) {
        /* what recvbuf holds now (the sum of ranks r-2d+1 .. r) goes up, the block below comes in */
        pl_group_start();
        if (r + d < n) pl_send(recvbuf, count, r + d, comm, stream);
        if (r - d >= 0) pl_recv(tmp, count, r - d, comm, stream);
        pl_group_end();
        if (r - d >= 0) pl_reduce_local(recvbuf, tmp, count, PL_SUM, stream);
    }
    pl_free(tmp);
}
