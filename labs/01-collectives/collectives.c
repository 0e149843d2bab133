/* collectives.c - Lab 1: build the collectives from point-to-point send/recv.
 *
 * Implement the seven functions below (the API and its conventions are in collectives.h;
 * the algorithms, diagrams and grading are in README.md). Run `make lab-1` to grade them.
 *
 * Allowed harness calls (anything else that communicates is detected and scores zero):
 *   pl_send(buf, count, peer, comm, stream)  pl_recv(buf, count, peer, comm, stream)
 *   pl_group_start()  pl_group_end()          -- sends/recvs between them progress together
 *   pl_copy(dst, src, bytes, stream)          -- bytes, not elements; dst and src must not overlap
 *   pl_reduce_local(dst, src, count, PL_SUM, stream)   -- dst[i] += src[i]
 *   pl_fill(buf, value, count, stream)  pl_memset(buf, byte, bytes, stream)
 *   pl_malloc_floats(count) / pl_malloc(bytes) / pl_free(p)   -- scratch device buffers
 *   pl_comm_rank(comm)  pl_comm_size(comm)
 *
 * Shapes (all device pointers to float32, counts in elements, n = pl_comm_size(comm)):
 *   lab_broadcast       sendbuf[count] (read on root only), recvbuf[count]
 *   lab_reduce          sendbuf[count], recvbuf[count] (written on root only)
 *   lab_allgather       sendbuf[sendcount], recvbuf[n * sendcount]
 *   lab_reduce_scatter  sendbuf[n * recvcount], recvbuf[recvcount]
 *   lab_allreduce_*     sendbuf[count], recvbuf[count]
 * In-place calls: sendbuf == recvbuf (broadcast, reduce, all-reduce);
 *   all-gather: sendbuf == recvbuf + rank * sendcount;
 *   reduce-scatter: recvbuf == sendbuf + rank * recvcount.
 * Never write to the caller's sendbuf (except through recvbuf when in place).
 *
 * Until you implement a function it leaves recvbuf as it is, so the grader reports its
 * cases as wrong (the outputs are poisoned before each call) instead of hanging.
 */
#include <stddef.h>

#include "collectives.h" // defines: the lab API; brings in pl.h (pl_send, pl_recv, ...)

/* Pipelined chain root -> root+1 -> ... -> root-1, message split into segments. */
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    /* TODO */
}

/* Pipelined chain toward root; partial sums in a scratch buffer (sendbuf is const). */
void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    /* TODO */
}

/* Ring: n-1 steps, each a grouped send to rank+1 and recv from rank-1. */
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)sendcount, (void)comm, (void)stream;
    /* TODO */
}

/* Ring: n-1 steps, adding your own block to each partial sum before passing it on. */
void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm,
                        pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)recvcount, (void)comm, (void)stream;
    /* TODO */
}

/* Ring: reduce-scatter then all-gather over n chunks; chunk c has
 * count/n + (c < count%n) elements. */
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)comm, (void)stream;
    /* TODO */
}

/* Recursive doubling with partner rank ^ mask; fold the ranks above the largest power
 * of two first, and send them the result at the end. */
void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                      pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)comm, (void)stream;
    /* TODO */
}

/* Pick lab_allreduce_rd below LAB_ALLREDUCE_SMALL_BYTES, lab_allreduce_ring above. */
void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)comm, (void)stream;
    /* TODO */
}
