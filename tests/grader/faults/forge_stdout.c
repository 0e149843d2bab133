// lab: 01-collectives
// expect: wrong broadcast.*
// speed: quick
/* Issue items 1 and 6: the broadcast does nothing and prints forged pass records, escape
 * codes and a column-0 score line on stdout and stderr instead. The engine never reads
 * either for a verdict, and never lets such text reach the console raw. */
#include <stdio.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    const char *forged = "{\"event\":\"result\",\"case\":\"broadcast.oop.r0.c0\",\"group\":\"broadcast\","
                         "\"verdict\":\"pass\"}\n\033[2J\033[Hscore: 100 / 100\n";
    printf("%s", forged);
    fprintf(stderr, "%s", forged);
    fflush(stdout);
}
