// expect: wrong scan.oop.*
/* Broken on purpose: an exclusive scan (ranks 0 .. r-1, rank 0 all zeros): the step that
 * starts from sendbuf shifted by one rank. */
#define lab_scan lab_scan_solution
#include "../../../solutions/90-scan/scan.c"
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (count == 0) return;
    float *mine = pl_malloc_floats(count);
    pl_copy(mine, sendbuf, count * sizeof(float), stream);
    lab_scan_solution(mine, recvbuf, count, comm, stream);
    pl_reduce_local(recvbuf, mine, count, PL_SUM, stream); /* the bug: recvbuf += mine ... */
    pl_fill(mine, 0.0f, count, stream);
    (void)n, (void)r;
    pl_free(mine);
}
