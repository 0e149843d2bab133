// expect: wrong rebuild.nosync
/* Broken on purpose: the rebuild happens at the first backward after iteration 0 even in
 * a no_sync micro-step, broadcasting rank 0's order while no_sync promises no collective. */
#define ddp_backward_begin ddp_backward_begin_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_begin
void ddp_backward_begin(ddp_state *d) {
    if (d->mode != DDP_NAIVE && !d->sync && d->iteration >= 1 && !d->rebuilt) {
        d->sync = true; /* the bug: rebuild now, no_sync or not */
        ddp_backward_begin_solution(d);
        d->sync = false;
        return;
    }
    ddp_backward_begin_solution(d);
}
