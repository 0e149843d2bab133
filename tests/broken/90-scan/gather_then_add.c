// expect: forbidden scan.oop.*
/* Broken on purpose: the library's all-gather brings every rank's vector, and each rank adds
 * the first r + 1 of them: right sums from a collective the lab forbids. */
#define lab_scan lab_scan_solution
#include "../../../solutions/90-scan/scan.c"
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (count == 0) return;
    float *all = pl_malloc_floats(count * (size_t)n);
    pl_allgather(sendbuf, all, count, comm, stream);
    pl_copy(recvbuf, all, count * sizeof(float), stream);
    for (int q = 1; q <= r; q++) pl_reduce_local(recvbuf, all + (size_t)q * count, count, PL_SUM, stream);
    pl_free(all);
}
