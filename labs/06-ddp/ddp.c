/* ddp.c - Lab 6: data-parallel training with gradient buckets. THE FILE YOU EDIT.
 *
 * Implement the functions declared in ddp.h (read it, and README.md, first):
 *   1. naive DDP: ddp_backward_end all-reduces every parameter's gradient, averaged;
 *   2. buckets: ddp_build_buckets groups parameters (reverse registration order at init;
 *      a bucket closes once its bytes reach its cap: first_bucket_cap_mb for bucket 0,
 *      bucket_cap_mb after), allocates one flat buffer per bucket and points every
 *      params[i].grad into it (copy the old contents; never free params[i].grad);
 *   3. overlap: ddp_grad_ready marks parameters ready; a bucket is launched (divide by the
 *      world size on the compute stream, then pl_allreduce PL_SUM on pl_stream_comm(),
 *      after pl_stream_wait_event) once it is full AND every earlier bucket was launched;
 *   4. no_sync: while d->sync is false, no collective at all;
 *   5. rebuild: before the second synced backward, rebuild once in the order gradients
 *      became ready in the first, rank 0's order sent to all with pl_broadcast.
 * Allowed: pl_malloc/pl_free/pl_copy/pl_fill/pl_scale, pl_allreduce, pl_broadcast,
 * pl_upload/pl_download, streams and events. Shapes: params[i].data/.grad are device
 * arrays of params[i].numel floats.
 */
#include <string.h>

#include "ddp.h"

void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm) {
    memset(d, 0, sizeof *d);
    d->mode = mode;
    d->comm = comm;
    d->params = params;
    d->nparams = nparams;
    d->bucket_cap_mb = bucket_cap_mb > 0 ? bucket_cap_mb : 25.0;
    d->first_bucket_cap_mb = first_bucket_cap_mb > 0 ? first_bucket_cap_mb : 1.0;
    d->sync = true;
    /* TODO: bucketed modes: build the buckets in reverse registration order */
}

void ddp_build_buckets(ddp_state *d, const int *order) {
    (void)d;
    (void)order;
    /* TODO */
}

void ddp_backward_begin(ddp_state *d) {
    (void)d;
    /* TODO: reset per-step state; rebuild once after the first synced iteration */
}

void ddp_grad_ready(ddp_state *d, int i) {
    (void)d;
    (void)i;
    /* TODO: record the order; overlap mode: launch full buckets in bucket order */
}

void ddp_backward_end(ddp_state *d) {
    (void)d;
    /* TODO: launch what is left, make the compute stream wait for the comm stream */
}

void ddp_set_sync(ddp_state *d, bool sync) { d->sync = sync; }

void ddp_free(ddp_state *d) {
    /* TODO: free your bucket buffers and events */
    d->nbuckets = 0;
}
