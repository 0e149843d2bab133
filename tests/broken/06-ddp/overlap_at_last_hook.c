// expect: wrong overlap.overlap
/* Broken on purpose: the overlap mode launches no bucket before the last gradient of the
 * backward is ready, then all of them inside that last ddp_grad_ready call. The results
 * are right and every all-reduce starts inside the backward region by the clock, but
 * after the last gradient was computed: nothing overlaps with compute. */
#define ddp_grad_ready ddp_grad_ready_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_grad_ready
void ddp_grad_ready(ddp_state *d, int i) {
    if (d->iteration == 0 && d->nready < d->nparams) d->ready_order[d->nready++] = i;
    if (d->mode == DDP_NAIVE || !d->sync) return;
    d->buckets[d->bucket_of[i]].ready++;
    if (d->mode != DDP_OVERLAP) return;
    int ready = 0;
    for (int b = 0; b < d->nbuckets; b++) ready += d->buckets[b].ready;
    if (ready < d->nparams) return; /* the bug: wait for every gradient */
    while (d->next_launch < d->nbuckets) launch_bucket(d, d->next_launch++);
}
