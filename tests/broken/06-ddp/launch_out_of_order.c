// expect: wrong order.*
/* Broken on purpose: a bucket is launched as soon as it is full, without waiting for the
 * earlier buckets, so ranks can start all-reduces in different orders. */
#define ddp_grad_ready ddp_grad_ready_solution
#define ddp_backward_end ddp_backward_end_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_grad_ready
#undef ddp_backward_end
void ddp_grad_ready(ddp_state *d, int i) {
    if (d->iteration == 0 && d->nready < d->nparams) d->ready_order[d->nready++] = i;
    if (d->mode == DDP_NAIVE || !d->sync) return;
    ddp_bucket *b = &d->buckets[d->bucket_of[i]];
    b->ready++;
    if (d->mode == DDP_OVERLAP && b->ready == b->nparams) launch_bucket(d, d->bucket_of[i]);
}
void ddp_backward_end(ddp_state *d) {
    if (!d->sync) return;
    if (d->mode == DDP_NAIVE) {
        for (int i = 0; i < d->nparams; i++) launch(d, d->params[i].grad, d->params[i].numel);
    } else {
        for (int b = 0; b < d->nbuckets; b++)
            if (!d->buckets[b].launched) launch_bucket(d, b);
    }
    pl_event_record(d->comm_done, pl_stream_comm());
    pl_stream_wait_event(NULL, d->comm_done);
    d->iteration++;
}
