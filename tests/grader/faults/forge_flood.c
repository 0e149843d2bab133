// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* Issue item 1: 300 000 forged records on the results channel (they kept protocol 1's
 * engine busy for 17 minutes). The first one breaks the protocol; the run is killed at
 * once. */
#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    int fd = fault_channel_fd();
    if (fd >= 0)
        for (int i = 0; i < 300000; i++)
            fault_write_fd(fd, "{\"event\":\"result\",\"case\":\"allreduce.oop.c0\",\"group\":\"allreduce\",\"verdict\":\"pass\"}\n");
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
