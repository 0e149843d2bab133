/* collectives.h - Lab 1: collectives built from point-to-point send/recv.
 *
 * You implement these in collectives.c using ONLY:
 *   pl_send, pl_recv, pl_group_start, pl_group_end     (point-to-point, NCCL semantics)
 *   pl_copy, pl_reduce_local, pl_fill, pl_memset        (local device operations)
 *   pl_malloc / pl_malloc_floats / pl_free              (scratch buffers)
 *   pl_comm_rank, pl_comm_size                          (who am I, how many)
 * Calling a library collective (pl_allreduce, pl_broadcast, ...) is detected by the
 * grader from the instrumentation and scores zero for that collective.
 *
 * Conventions, as in NCCL:
 *  - all buffers are device pointers of float32; `count` is in elements;
 *  - out-of-place when sendbuf != recvbuf, in-place when sendbuf == recvbuf;
 *  - every rank calls with the same count and root; counts may be 0, may be smaller
 *    than the number of ranks, and need not divide it;
 *  - the reduction is a sum; work on `stream` (pass it to every call you make).
 */
#ifndef LAB01_COLLECTIVES_H
#define LAB01_COLLECTIVES_H

#include <stddef.h>

#include "pl.h"

/* recvbuf[0..count) on every rank = sendbuf[0..count) of `root`.
 * Optimal: at most count*4 bytes sent by any rank (pipelined chain). */
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream);

/* recvbuf[0..count) on `root` = sum over ranks of sendbuf[0..count); recvbuf on other
 * ranks is not read and may be left unchanged. Optimal: at most count*4 bytes per rank. */
void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream);

/* recvbuf[r*sendcount .. (r+1)*sendcount) = rank r's sendbuf, on every rank.
 * In-place: sendbuf == recvbuf + rank*sendcount. Ring: (n-1)/n * S bytes per rank,
 * S = sendcount*n*4. */
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream);

/* recvbuf[0..recvcount) on rank r = sum over ranks of their sendbuf[r*recvcount ..).
 * In-place: recvbuf == sendbuf + rank*recvcount. Ring: (n-1)/n * S bytes per rank,
 * S = recvcount*n*4. */
void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm,
                        pl_stream *stream);

/* recvbuf = sum over ranks of sendbuf, on every rank, as a ring: reduce-scatter then
 * all-gather over n chunks of (nearly) equal size. 2(n-1)/n * S bytes per rank. */
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream);

/* Same result, latency-optimal for small messages: recursive doubling in ceil(log2 n)
 * exchange steps, with a fold step when n is not a power of two. */
void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                      pl_stream *stream);

/* Same result; picks lab_allreduce_rd below LAB_ALLREDUCE_SMALL_BYTES, the ring above. */
#define LAB_ALLREDUCE_SMALL_BYTES (64u * 1024u)
void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                   pl_stream *stream);

#endif
