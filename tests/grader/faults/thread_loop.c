// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
// sandbox: on
/* One broadcast case starts threads until the kernel says no, leaves them blocked and skips
 * its work. pthread_create() and pause() are not on the build's list of what a lab may
 * call; below it, the play filter allows clone() for threads only, and inside the sandbox
 * RLIMIT_NPROC bounds them. */
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
