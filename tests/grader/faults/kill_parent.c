// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 3: a rank stops its parent chain (mpirun, then pl-grade) with SIGSTOP: the
 * engine would freeze. The object checker refuses kill(); in the sandbox the engine is
 * outside the rank's PID namespace anyway. */
#include <signal.h>
#include <unistd.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    kill(getppid(), SIGSTOP);
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
