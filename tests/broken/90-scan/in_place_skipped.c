// expect: wrong scan.ip.*
/* Broken on purpose: the in-place call returns at once (sendbuf == recvbuf read as "the
 * output is already there"): right out of place, every rank but 0 wrong in place. */
#define lab_scan lab_scan_solution
#include "../../../solutions/90-scan/scan.c"
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    if (sendbuf == recvbuf) return; /* the bug */
    lab_scan_solution(sendbuf, recvbuf, count, comm, stream);
}
