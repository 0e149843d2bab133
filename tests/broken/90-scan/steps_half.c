// expect: wrong scan.oop.*
/* Broken on purpose: the loop stops at d < n / 2, one step short whenever n is not a power
 * of two (and at n = 2, where it takes none). */
#define lab_scan lab_scan_solution
#include "../../../solutions/90-scan/scan.c"
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (count == 0) return;
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    float *tmp = pl_malloc_floats(count);
    for (int d = 1; d < n / 2; d *= 2) { /* the bug */
        pl_group_start();
        if (r + d < n) pl_send(recvbuf, count, r + d, comm, stream);
        if (r - d >= 0) pl_recv(tmp, count, r - d, comm, stream);
        pl_group_end();
        if (r - d >= 0) pl_reduce_local(recvbuf, tmp, count, PL_SUM, stream);
    }
    pl_free(tmp);
}
