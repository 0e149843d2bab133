// lab: 01-collectives
// expect: wrong broadcast.*
// speed: quick
// sandbox: both
/* The reference solution is in the tree: the broadcast tries to read it (and the rubric)
 * through the C library's own "syscall; ret" (forge.h) and does nothing else. The play
 * filter refuses every open with EACCES, and the sandbox of make grade does not even bind
 * the tree (only the driver's directory and the lab's data). The starter's score. */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    long a = fault_open("solutions/01-collectives/collectives.c");
    long b = fault_open("grader/rubrics/01-collectives.rubric");
    /* had either opened, the broadcast would work: a pass here means the files were readable */
    if (a >= 0 || b >= 0) lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
