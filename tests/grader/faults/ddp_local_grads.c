// lab: 06-ddp
// expect: wrong equal.*
// speed: quick
/* Issue item 2 in Lab 6: no communication at all - each rank averages... only its own
 * gradients (scaled by 1/n, never summed), with zero bytes sent. The replicas drift apart
 * from the single-process reference: wrong. */
#include "pl.h"

static void no_allreduce(const float *send, float *recv, size_t count, pl_op op, pl_comm *comm,
                         pl_stream *stream) {
    (void)send, (void)recv, (void)count, (void)op, (void)comm, (void)stream;
}
#define pl_allreduce no_allreduce
#include "../../../solutions/06-ddp/ddp.c"
#undef pl_allreduce
