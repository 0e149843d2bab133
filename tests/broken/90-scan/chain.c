// expect: wrong scan.oop.*
/* Broken on purpose: the chain (rank r waits for r-1's prefix, adds its own, passes it
 * on): the right sums in n-1 steps, with other traffic than recursive doubling. */
#define lab_scan lab_scan_solution
#include "../../../solutions/90-scan/scan.c"
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (count == 0) return;
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (r > 0) {
        float *tmp = pl_malloc_floats(count);
        pl_recv(tmp, count, r - 1, comm, stream);
        pl_reduce_local(recvbuf, tmp, count, PL_SUM, stream);
        pl_free(tmp);
    }
    if (r + 1 < n) pl_send(recvbuf, count, r + 1, comm, stream);
}
