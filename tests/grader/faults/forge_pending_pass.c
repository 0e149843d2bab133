// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* Issue item 1, the careful forger: the broadcast does nothing, works out the name of the
 * running case from its arguments and sends a pass for exactly that case on the results
 * channel. The engine takes it - and then the driver's own result for the same case
 * arrives: a second result, so the forged case is revised to tampered. */
#include <stdio.h>

#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)comm, (void)stream;
    int fd = fault_channel_fd();
    if (fd < 0) return;  // not rank 0
    char record[256];
    snprintf(record, sizeof record,
             "{\"event\":\"result\",\"case\":\"broadcast.%s.r%d.c%zu\",\"group\":\"broadcast\",\"verdict\":\"pass\"}\n",
             sendbuf == recvbuf ? "ip" : "oop", root, count);
    fault_write_fd(fd, record);
}
