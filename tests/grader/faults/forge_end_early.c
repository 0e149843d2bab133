// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* Issue item 1: "a forged end record followed by a clean exit skips the cases the student
 * would fail". The broadcast writes an end record on the results channel (through stdout's
 * FILE pointed at the socket: write() the build refuses). It does not carry the run's
 * signature, and an end record while a case is running breaks the protocol anyway:
 * tampered, the rest missing. The clean exit that would follow, exit(0), the build refuses
 * (exit_clean.c). */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    int fd = fault_channel_fd();
    if (fd >= 0) fault_write_fd(fd, "{\"event\":\"end\",\"cases\":0,\"failed\":0}\n");
}
