// lab: 06-ddp
// expect: tampered nosync
// speed: quick
// np: 2
/* Moving the bounds of a counted phase: in each no_sync micro-step, the student's
 * ddp_backward_end ends the phase its referee is counting (a forged mark on the control
 * socket, the kit's wire layout copied from its source) and only then all-reduces a scratch
 * copy of every gradient, outside any phase. A phase begins and ends once per case: the
 * kit's own end mark after it is refused, and the run ends as tampered. */
#include <stdint.h>
#include <string.h>

#include "forge.h"

enum { SLOTS_MAX = 96 }; /* the wire layout is forge.h's */

#define ddp_backward_end ddp_backward_end_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_end
void ddp_backward_end(ddp_state *d);

static int g_step; /* the micro-step, as the kit numbers its marks (LAB6_MARK_END) */

void ddp_backward_end(ddp_state *d) {
    int step = g_step++;
    if (d->sync || d->nparams == 0) {
        ddp_backward_end_solution(d);
        return;
    }
    pl_device_sync();
    struct {
        fault_wire_msg m;
        fault_xfer_req r;
    } forged;
    memset(&forged, 0, sizeof forged);
    forged.m.cmd = FAULT_REP_XFER;
    forged.m.len = sizeof forged.r;
    forged.r.id = (1u << 30) + (unsigned)step;
    forged.r.kind = FAULT_XFER_MARK;
    forged.r.peer = SLOTS_MAX + 2 * step + 1;
    forged.r.op = 1;
    fault_write(FAULT_CONTROL_FD, &forged, (long)sizeof forged);
    for (int i = 0; i < d->nparams; i++) {
        float *scratch = pl_malloc_floats(d->params[i].numel);
        pl_allreduce(d->params[i].grad, scratch, d->params[i].numel, PL_SUM, d->comm, NULL);
        pl_device_sync();
        pl_free(scratch);
    }
}
