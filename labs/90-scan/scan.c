/* scan.c - Lab 90: an inclusive prefix sum across the ranks. YOUR FILE.
 *
 * Implement lab_scan (scan.h says what it computes and how; README.md shows the steps).
 * Allowed: pl_send, pl_recv, pl_group_start, pl_group_end, pl_copy, pl_reduce_local,
 * pl_malloc_floats, pl_free, pl_comm_rank, pl_comm_size. Until you write it, recvbuf is
 * left as it is and every case is reported wrong. */
#include "scan.h" // defines: lab_scan; brings in pl.h

void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)comm, (void)stream;
    /* TODO */
}
