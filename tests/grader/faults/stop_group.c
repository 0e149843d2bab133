// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 3: a rank sends SIGSTOP to its whole process group. The object checker refuses
 * kill(). */
#include <signal.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    kill(0, SIGSTOP);
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
