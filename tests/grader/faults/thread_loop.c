// lab: 01-collectives
// expect: wrong broadcast.oop.r0.c512
// speed: quick
// sandbox: on
/* Issue item 3, what gets past the object checker: fork() is refused, pthread_create() is
 * not. One broadcast case starts threads until the kernel says no, leaves them blocked and
 * skips its work. Inside the sandbox RLIMIT_NPROC (threads count) stops the loop after a
 * few hundred; the case is wrong, the run finishes in time, and nothing outlives it. */
#include <pthread.h>
#include <unistd.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

static void *block(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (count == 512 && root == 0 && sendbuf != recvbuf) {
        pthread_t t;
        for (int i = 0; i < 100000 && pthread_create(&t, NULL, block, NULL) == 0; i++) {}
        return;  // the broadcast never happens: wrong
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
