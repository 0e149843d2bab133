// expect: wrong overlap.z*
// expect-message: issued on the compute stream
/* Broken on purpose: the gradients' reduce-scatters go on the compute stream ("in order,
 * no events to get wrong"). Issued from the right hook, so the order of issue looks like
 * overlap, and every result is right; but on a GPU the backward of the next units queues
 * behind each reduce-scatter: nothing is hidden. */
#include "pl.h" /* declared first: the macros below replace only the solution's calls */
#define pl_reduce_scatter(send, recv, count, op, comm, stream) pl_reduce_scatter(send, recv, count, op, comm, NULL)
#define pl_reduce_scatter_bf16(send, recv, count, op, comm, stream) \
    pl_reduce_scatter_bf16(send, recv, count, op, comm, NULL)
#include "../../../solutions/07-zero/zero.c"
