// lab: 01-collectives
// expect: deadlock broadcast.oop.r0.c512
// speed: quick
/* Issue item 3: rank 1 stops itself (raise is not refused) in one broadcast case. The
 * other ranks wait for it until the comm watchdog reports a deadlock; the stopped rank is
 * in a process group of its own, so only the engine's descendant sweep kills it. The other
 * cases still run (restart) and no process is left behind. */
#include <signal.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (count == 512 && root == 0 && sendbuf != recvbuf && pl_comm_rank(comm) == 1) raise(SIGSTOP);
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
