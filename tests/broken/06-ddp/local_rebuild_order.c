// expect: wrong rebuild.*
/* Broken on purpose: the rebuild uses this rank's own observed order instead of rank 0's,
 * so ranks can disagree on the bucket layout. */
#define ddp_backward_begin ddp_backward_begin_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_begin
void ddp_backward_begin(ddp_state *d) {
    if (d->mode != DDP_NAIVE && d->sync && d->iteration >= 1 && !d->rebuilt) {
        ddp_build_buckets(d, d->ready_order); /* the bug: no broadcast */
        d->rebuilt = true;
    }
    ddp_backward_begin_solution(d);
}
