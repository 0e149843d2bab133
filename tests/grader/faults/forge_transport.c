// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* A forged transport request: the broadcast asks its referee, on the control socket, to send
 * the bytes at an offset far outside the transport's arena (the referee's own memory, were
 * it taken at its word), on a communicator it never made. The referee checks every request
 * against the arena and its communicators before it moves a byte: the run ends as
 * tampered. */
#include <stdint.h>
#include <string.h>

#include "forge.h"


#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)stream;
    struct {
        fault_wire_msg m;
        fault_xfer_req r;
    } forged;
    memset(&forged, 0, sizeof forged);
    forged.m.cmd = FAULT_REP_XFER;
    forged.m.len = sizeof forged.r;
    forged.r.id = 1u << 30;
    forged.r.kind = FAULT_XFER_SEND;
    forged.r.dtype = FAULT_XFER_F32;
    forged.r.peer = (pl_comm_rank(comm) + 1) % pl_comm_size(comm);
    forged.r.count = 1024;
    forged.r.in_off = (uint64_t)1 << 46;
    fault_write(FAULT_CONTROL_FD, &forged, (long)sizeof forged);
    for (;;) { /* wait to be stopped */
    }
}
