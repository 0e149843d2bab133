// lab: 01-collectives
// expect: crash broadcast.oop.r0.*
/* Broken on purpose, for the AddressSanitizer flavour only: the broadcast keeps a scratch
 * array from malloc and writes one float past its end. No red zone of the harness sees it
 * (the array is the lab's own, not a pl_malloc buffer) and the write lands in the slack
 * malloc leaves, so the plain flavour passes; the sanitizer reports a heap-buffer-overflow
 * and aborts the rank: a crash. */
#include <stdlib.h>
#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream);

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    volatile float *scratch = malloc(7 * sizeof(float));
    if (scratch) {
        for (int i = 0; i <= 7; i++) scratch[i] = (float)i; /* the bug: <= */
        free((void *)scratch);
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
