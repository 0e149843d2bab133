// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* 300 000 forged records (they kept protocol 1's engine busy for 17 minutes), now into the
 * player's control socket: its referee reads the first bytes as a reply that is none,
 * stops the run (a signed abort) and the engine kills it at once. */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    int fd = FAULT_CONTROL_FD;
    if (fd >= 0)
        for (int i = 0; i < 300000; i++)
            fault_write_fd(fd, "{\"event\":\"result\",\"case\":\"allreduce.oop.c0\",\"group\":\"allreduce\",\"verdict\":\"pass\"}\n");
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
