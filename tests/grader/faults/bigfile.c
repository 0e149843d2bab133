// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* One broadcast case writes a byte 1.5 GiB into a temporary file. Files are no lab's
 * business: tmpfile() is not on the build's list of what a lab may call, and the player's
 * play filter refuses open() anyway. (The run's file size limit, SIGXFSZ past 1 GiB, stays
 * behind both: the engine's self-test checks it with its fake driver.) */
#include <stdio.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (count == 512 && root == 0 && sendbuf != recvbuf) {
        FILE *f = tmpfile();
        if (f && fseek(f, 3L * 512 * 1024 * 1024, SEEK_SET) == 0) fputc('x', f);
        if (f) fclose(f);
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
