// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Rank 1 stops itself in one broadcast case: raise() is not on the build's list of what a
 * lab may call (signals are no lab's business). Through the C library's own code it could
 * still signal itself - the play filter allows signals to itself only - and the others
 * would wait for it until the watchdog calls it a deadlock (libc_gadget.c goes that way). */
#include <signal.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (count == 512 && root == 0 && sendbuf != recvbuf && pl_comm_rank(comm) == 1) raise(SIGSTOP);
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
