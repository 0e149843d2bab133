// lab: 01-collectives
// expect: timeout broadcast.oop.r0.c512
// speed: slow
// np: 1
/* Issue item 5: one broadcast case hangs and prints a junk line every 20 s to stdout and
 * stderr (protocol 1 counted any line as progress, so the case lived until the 1800 s run
 * cap). Only valid records on the results channel move the clock: it is a timeout after the
 * rubric's 60 s. At one rank there is no peer whose watchdog could call it a deadlock. */
#include <stdio.h>
#include <unistd.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (count == 512 && root == 0 && sendbuf != recvbuf) {
        for (;;) {  /* sleep() is no lab's business: spin about 20 s between lines */
            printf("{\"event\":\"begin\",\"case\":\"still working\"}\n");
            fflush(stdout);
            fprintf(stderr, "still working...\n");
            for (volatile unsigned long i = 0; i < 8000000000ul; i++) {}
        }
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
