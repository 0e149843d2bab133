// expect: wrong rebuild.once
/* Broken on purpose: the order is recorded in every synced iteration and the buckets are
 * rebuilt before every synced backward after the first, in the latest order: one broadcast
 * per step, and a layout that follows whatever order the last step happened to show. */
#define ddp_backward_begin ddp_backward_begin_solution
#define ddp_grad_ready ddp_grad_ready_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_begin
#undef ddp_grad_ready
void ddp_backward_begin(ddp_state *d) {
    d->rebuilt = false; /* the bug: "once" forgotten */
    ddp_backward_begin_solution(d);
    if (d->sync) d->nready = 0; /* record this iteration's order anew */
}
void ddp_grad_ready(ddp_state *d, int i) {
    if (d->nready < d->nparams) d->ready_order[d->nready++] = i;
    int iteration = d->iteration;
    d->iteration = iteration ? iteration : 1; /* the order is recorded above */
    ddp_grad_ready_solution(d, i);
    d->iteration = iteration;
}
