// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 3: an infinite fork loop. The object checker refuses fork(); in the sandbox
 * RLIMIT_NPROC would stop it (see thread_loop.c for what gets through the checker). */
#include <unistd.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    for (;;) fork();
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
