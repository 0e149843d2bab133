// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* The careful forger: the broadcast does nothing, works out the name of the running case
 * from its arguments and sends a pass for exactly that case - but the player's only channel
 * is the control socket to its referee, who decides and signs the verdicts: the bytes are
 * not a reply, the referee stops the run with a signed abort, tampered. */
#include <stdio.h>

#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)comm, (void)stream;
    int fd = FAULT_CONTROL_FD;
    char record[256];
    snprintf(record, sizeof record,
             "{\"event\":\"result\",\"case\":\"broadcast.%s.r%d.c%zu\",\"group\":\"broadcast\",\"verdict\":\"pass\"}\n",
             sendbuf == recvbuf ? "ip" : "oop", root, count);
    fault_write_fd(fd, record);
}
