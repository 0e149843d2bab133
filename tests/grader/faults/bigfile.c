// lab: 01-collectives
// expect: crash broadcast.oop.r0.c512
// speed: quick
/* Issue item 3 and the limits: one broadcast case writes a byte 1.5 GiB into a temporary
 * file (tmpfile() is not refused: it names no path). The file size limit of every run
 * (1 GiB) turns the write into SIGXFSZ: a crash, and nothing is written. */
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
