// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* "A forged end record followed by a clean exit skips the cases the student would fail".
 * The player holds no results channel: its only socket is the control socket to its
 * referee. The broadcast writes an end record there (stdout's FILE pointed at it: write()
 * the build refuses); the referee reads bytes that are not its player's reply and stops the
 * run with a signed abort: tampered, the rest missing. exit(0) the build refuses. */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    fault_write_fd(FAULT_CONTROL_FD, "{\"event\":\"end\",\"cases\":0,\"failed\":0}\n");
}
