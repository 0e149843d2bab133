// expect: wrong rebuild.*
/* Broken on purpose: buckets keep the reverse-registration layout forever. */
#define ddp_backward_begin ddp_backward_begin_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_begin
void ddp_backward_begin(ddp_state *d) {
    d->rebuilt = true; /* the bug: pretend it was done */
    ddp_backward_begin_solution(d);
}
