// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
// sandbox: both
/* Past the allow-list through the C library's own code: the broadcast finds a
 * "syscall; ret" sequence after qsort and calls it through a pointer (forge.h), to open the
 * engine's and the referee's /proc files and the tree's solutions/ (the play filter answers
 * EACCES to every open), then writes a forged pass into every descriptor 3..63 with the
 * real write system call. The player's only channel is the control socket to its referee,
 * which reads bytes that are not its player's reply and stops the run: tampered. The
 * static scan names the cast of data to a function pointer (make grade prints it). */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    static const char *targets[] = {"/proc/1/environ", "/proc/self/../1/mem", "solutions/01-collectives/collectives.c",
                                    "grader/rubrics/01-collectives.rubric"};
    long opened = 0;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) opened += fault_open(targets[i]) >= 0;
    char rec[160];
    snprintf(rec, sizeof rec, "{\"event\":\"result\",\"case\":\"broadcast.oop.r0.c0\",\"verdict\":\"pass\",\"opened\":%ld}\n",
             opened);
    for (long fd = 3; fd < 64; fd++) fault_write(fd, rec, (long)strlen(rec));
}
