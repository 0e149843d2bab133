// expect: error step.gpipe
// expect-message: of this group writes memory that operation
/* Broken on purpose: each boundary gives a send's buffer back to the pool as soon as the
 * send is posted, not once its group has ended, so a receive later in the same group can
 * take that buffer. The group's operations run at once (NCCL's semantics): the receive
 * overwrites the activation while it is being sent. MPI's eager path would finish the send
 * first and hide it; the harness refuses the group at pl_group_end, naming both calls. */
#include "pl.h" /* declared first: the macros below replace only the solution's calls */
#define pl_send(b, n, peer, comm, s) (pl_send(b, n, peer, comm, s), buf_put(x, (float *)(b)))
#define pl_group_end() (pl_group_end(), nsent = 0) /* the buffers went back already */
#include "../../../solutions/04-pipeline/pipeline.c"
