// expect: full rebuild.*
/* A correct alternative: as PyTorch's reducer does, ddp_grad_ready records nothing in a
 * no_sync pass (its hooks do not run outside a synced backward); the order comes from the
 * first synced backward alone. */
#define ddp_grad_ready ddp_grad_ready_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_grad_ready
void ddp_grad_ready(ddp_state *d, int i);

void ddp_grad_ready(ddp_state *d, int i) {
    if (!d->sync) return; /* no_sync: no record, no communication */
    ddp_grad_ready_solution(d, i);
}
