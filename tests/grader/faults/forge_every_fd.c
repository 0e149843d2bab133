// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* The broadcast does nothing and writes a forged pass record to every descriptor 3..63
 * without calling write() (stdout's FILE is pointed at each in turn). The first is the
 * player's control socket to its referee: the referee reads bytes that are not its
 * player's reply, stops the run with a signed abort, and the engine calls it tampered
 * (what the writes into MPI's own sockets do next no longer matters). */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    for (int fd = 3; fd < 64; fd++)
        fault_write_fd(fd, "{\"event\":\"result\",\"case\":\"broadcast.oop.r0.c0\",\"group\":\"broadcast\",\"verdict\":\"pass\"}\n");
}
