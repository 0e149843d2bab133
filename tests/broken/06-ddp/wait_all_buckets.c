// expect: wrong overlap.*
/* Broken on purpose: the overlap mode waits until every bucket is full and launches them
 * all after backward: correct results, no overlap at all. */
#define ddp_grad_ready ddp_grad_ready_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_grad_ready
void ddp_grad_ready(ddp_state *d, int i) {
    if (d->iteration == 0 && d->nready < d->nparams) d->ready_order[d->nready++] = i;
    if (d->mode == DDP_NAIVE || !d->sync) return;
    d->buckets[d->bucket_of[i]].ready++; /* the bug: never launched here */
}
