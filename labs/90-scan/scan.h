/* scan.h - Lab 90: prefix sums across the ranks (a scan) from point-to-point send/recv.
 *
 * You implement lab_scan in scan.c using only pl_send, pl_recv, pl_group_start,
 * pl_group_end, pl_copy, pl_reduce_local, pl_malloc_floats / pl_free, pl_comm_rank and
 * pl_comm_size. Buffers are device pointers of float32, counts in elements; work on
 * `stream` (pass it to every call you make).
 */
#ifndef LAB90_SCAN_H
#define LAB90_SCAN_H

#include <stddef.h>

#include "pl.h"

/* recvbuf[0..count) on rank r = the sum over ranks 0..r of their sendbuf[0..count) (an
 * inclusive scan, as MPI_Scan with MPI_SUM). Every rank calls with the same count (0 is
 * fine); sendbuf == recvbuf is the in-place call. Recursive doubling (Hillis-Steele): in
 * step k = 0, 1, ... while 2^k < n, rank r sends what it holds to r + 2^k (if there is
 * one) and adds what r - 2^k sends it (if there is one): ceil(log2 n) steps, and rank r
 * sends count * 4 bytes in each step where r + 2^k < n, nothing else. */
void lab_scan(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

#endif
