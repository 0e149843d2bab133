// expect: wrong rebuild.late
/* Broken on purpose: ddp_backward_end counts every backward pass as an iteration, the
 * no_sync ones too. A run that starts with a no_sync micro-step then rebuilds the buckets
 * before its first synced backward, in the order of the no_sync pass, where the rebuild
 * belongs after the first synced backward and follows its order. */
#define ddp_backward_end ddp_backward_end_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_end
void ddp_backward_end(ddp_state *d);

void ddp_backward_end(ddp_state *d) {
    if (!d->sync) {
        d->iteration++; /* the bug */
        return;
    }
    ddp_backward_end_solution(d);
}
