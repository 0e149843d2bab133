// expect: pass scan.oop.*
// expect-perf: freed
/* Broken on purpose: the scratch buffer is never freed: right sums, right traffic, one
 * allocation left per call. */
#include "scan.h" /* pl.h first: the macro below must not reach its declarations */
#define lab_scan lab_scan_solution
#define pl_free(p) ((void)(p)) /* the bug */
#include "../../../solutions/90-scan/scan.c"
#undef pl_free
#undef lab_scan

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    lab_scan_solution(sendbuf, recvbuf, count, comm, stream);
}
