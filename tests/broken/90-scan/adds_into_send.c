// expect: wrong scan.oop.*
/* Broken on purpose: the partial sums are kept in sendbuf (cast from const) and copied to
 * recvbuf at the end: right outputs, the caller's input overwritten. */
#define lab_scan lab_scan_solution
#include "../../../solutions/90-scan/scan.c"
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    if (count == 0) return;
    float *work = (float *)sendbuf; /* the bug */
    lab_scan_solution(work, work, count, comm, stream);
    if (work != recvbuf) pl_copy(recvbuf, work, count * sizeof(float), stream);
}
