// lab: 01-collectives
// expect: error broadcast.oop.r0.c512
// speed: quick
/* Issue item 6: one broadcast case prints, on stderr, a line with "error" (so it becomes
 * the failure's reason), escape codes, a line break followed by a column-0 score line, a
 * carriage return, XML-invalid control characters and bytes that are not UTF-8 - then
 * leaves the driver through pl_usage_error (exit() itself the build refuses), its text full
 * of the same. The reason reaches the console cleaned and indented, junit.xml stays valid
 * XML, and the engine's score line is the only one. */
#include <stdio.h>
#include <stdlib.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (count == 512 && root == 0 && sendbuf != recvbuf) {
        fprintf(stderr, "\033[2J\033[H\nscore: 100 / 100\nerror: \033[31m<b>&\x01\x02\xff\xfe\r\nscore: 100 / 100\n");
        fflush(stderr);
        pl_usage_error("\033[31m<b>&\x01\x02\xff\xfe\r\nscore: 100 / 100");
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
