/* pl_comm.h - communicators, point-to-point send/recv with group semantics, and the
 * library collectives (float32).
 *
 * Semantics follow NCCL so that code written here runs unchanged over NCCL:
 *  - a send completes only once the matching receive is posted (rendezvous), so two
 *    ranks that both send first and receive second deadlock unless the calls are
 *    inside one pl_group_start()/pl_group_end() pair;
 *  - calls inside a group are posted together and progress together; groups nest; a
 *    receive may not touch memory another call of its group sends or receives (refused
 *    at pl_group_end: on NCCL they race);
 *  - every operation is ordered on the stream it is given (NULL: compute stream).
 * Every blocking wait is guarded by the comm watchdog (see pl_watchdog_* in pl_trace.h).
 */
#ifndef PL_COMM_H
#define PL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "pl_bf16.h"
#include "pl_device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_comm pl_comm;

pl_comm *pl_comm_world(void);
int pl_comm_rank(const pl_comm *c);
int pl_comm_size(const pl_comm *c);
/* Ranks with the same colour form a new communicator, ordered by key then parent rank; a
 * rank with a negative colour joins none and gets NULL. Collective over the parent. */
pl_comm *pl_comm_split(pl_comm *parent, int color, int key);
void pl_comm_free(pl_comm *c);
void pl_barrier(pl_comm *c); /* host-side barrier, also syncs this rank's streams */

/* -- point-to-point ------------------------------------------------------------------ */
void pl_group_start(void);
void pl_group_end(void);
void pl_send(const float *buf, size_t count, int peer, pl_comm *c, pl_stream *s);
void pl_recv(float *buf, size_t count, int peer, pl_comm *c, pl_stream *s);

/* -- library collectives (in place when sendbuf == recvbuf) ------------------------- */
void pl_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_op op, pl_comm *c,
                  pl_stream *s);
/* recvbuf holds sendcount * size elements, rank r's block at r * sendcount. */
void pl_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *c,
                  pl_stream *s);
/* sendbuf holds recvcount * size elements; rank r receives the reduction of block r. */
void pl_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_op op,
                       pl_comm *c, pl_stream *s);
void pl_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *c,
                  pl_stream *s);
void pl_reduce(const float *sendbuf, float *recvbuf, size_t count, pl_op op, int root,
               pl_comm *c, pl_stream *s);
/* sendbuf and recvbuf hold count * size elements; block j of sendbuf goes to rank j. */
void pl_alltoall(const float *sendbuf, float *recvbuf, size_t count, pl_comm *c, pl_stream *s);

/* -- bfloat16 collectives -------------------------------------------------------------
 * The same conventions on buffers of 16-bit bf16 words (kernels/kern_bf16.h converts), counts
 * in elements, S = 2 bytes per element. A reduction adds in float32 and rounds the result to
 * bf16 at each step of the backend's algorithm, as NCCL does, so sums depend on its order. */
void pl_allgather_bf16(const uint16_t *sendbuf, uint16_t *recvbuf, size_t sendcount, pl_comm *c,
                       pl_stream *s);
void pl_reduce_scatter_bf16(const uint16_t *sendbuf, uint16_t *recvbuf, size_t recvcount, pl_op op,
                            pl_comm *c, pl_stream *s);

#ifdef __cplusplus
}
#endif

#endif
