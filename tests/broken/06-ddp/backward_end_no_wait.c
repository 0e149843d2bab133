// expect: wrong equal.*
// np: 2
/* Broken on purpose: ddp_backward_end issues the last buckets but never makes the compute
 * stream wait for the comm stream. The gradients are all averaged once the device is
 * synchronised; but the optimizer runs next on the compute stream, and on a GPU it reads
 * the gradients before their all-reduces have landed. */
#define ddp_backward_end ddp_backward_end_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_end
void ddp_backward_end(ddp_state *d);

void ddp_backward_end(ddp_state *d) {
    if (!d->sync) return;
    if (d->mode == DDP_NAIVE) {
        for (int i = 0; i < d->nparams; i++) launch(d, d->params[i].grad, d->params[i].numel);
    } else {
        while (d->next_launch < d->nbuckets) launch_bucket(d, d->next_launch++);
    }
    d->iteration++; /* the bug: no event on the comm stream, no wait on the compute stream */
}
