// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 1, the second half: after forging, leave with a clean exit so that the cases
 * the student would fail are never run. A lab's code never ends the process: the build
 * refuses exit (and _exit, quick_exit, pl_finalize...): forbidden. */
#include <stdlib.h>

#define lab_reduce lab_reduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_reduce

void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm, pl_stream *stream) {
    if (count > 1000) exit(0);
    lab_reduce_solution(sendbuf, recvbuf, count, root, comm, stream);
}
