/* ddp.c - Lab 6 reference solution: naive, bucketed and overlapped data parallelism with
 * no_sync accumulation and one bucket rebuild (see labs/06-ddp/README.md). */
#include <stdlib.h>
#include <string.h>

#include "ddp.h"

static size_t cap_bytes(double mb) { return (size_t)(mb * 1024.0 * 1024.0); }

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
    d->comm_done = pl_event_create();
    if (mode == DDP_NAIVE) return;
    /* backward produces gradients roughly last layer first: reverse registration order */
    int order[DDP_MAX_PARAMS];
    for (int i = 0; i < nparams; i++) order[i] = nparams - 1 - i;
    ddp_build_buckets(d, order);
}

void ddp_build_buckets(ddp_state *d, const int *order) {
    ddp_bucket old[DDP_MAX_PARAMS];
    int nold = d->nbuckets;
    memcpy(old, d->buckets, sizeof old);
    memset(d->buckets, 0, sizeof d->buckets);
    d->nbuckets = 0;
    size_t bytes = 0;
    for (int k = 0; k < d->nparams; k++) {
        int i = order[k];
        if (d->nbuckets == 0 || bytes >= cap_bytes(d->nbuckets == 1 ? d->first_bucket_cap_mb : d->bucket_cap_mb)) {
            d->nbuckets++; /* the current bucket reached its cap: open the next */
            bytes = 0;
        }
        ddp_bucket *b = &d->buckets[d->nbuckets - 1];
        b->params[b->nparams] = i;
        b->offsets[b->nparams] = b->numel;
        b->nparams++;
        b->numel += d->params[i].numel;
        bytes += d->params[i].numel * sizeof(float);
        d->bucket_of[i] = d->nbuckets - 1;
    }
    /* flat buffers; each gradient becomes a view, keeping what it held */
    for (int b = 0; b < d->nbuckets; b++) {
        ddp_bucket *bk = &d->buckets[b];
        bk->buf = pl_malloc_floats(bk->numel);
        for (int j = 0; j < bk->nparams; j++) {
            ddp_param *p = &d->params[bk->params[j]];
            float *view = bk->buf + bk->offsets[j];
            if (p->grad) pl_copy(view, p->grad, p->numel * sizeof(float), NULL);
            p->grad = view;
        }
    }
    pl_stream_sync(NULL); /* the copies read the old buffers: finish before freeing them */
    for (int b = 0; b < nold; b++) pl_free(old[b].buf);
}

/* Average into the bucket (divide, then the all-reduce sums) and launch it on the comm
 * stream once the compute stream has produced its gradients. */
static void launch(ddp_state *d, float *buf, size_t numel) {
    pl_scale(buf, 1.0f / (float)pl_comm_size(d->comm), numel, NULL);
    pl_event *ready = pl_event_create();
    pl_event_record(ready, NULL);
    pl_stream_wait_event(pl_stream_comm(), ready);
    pl_allreduce(buf, buf, numel, PL_SUM, d->comm, pl_stream_comm());
    pl_event_destroy(ready);
}

static void launch_bucket(ddp_state *d, int b) {
    launch(d, d->buckets[b].buf, d->buckets[b].numel);
    d->buckets[b].launched = true;
}

void ddp_backward_begin(ddp_state *d) {
    if (d->mode != DDP_NAIVE && d->sync && d->iteration >= 1 && !d->rebuilt) {
        /* every rank must agree on the layout: rank 0's observed order wins */
        float *dev = pl_malloc_floats((size_t)d->nparams);
        float host[DDP_MAX_PARAMS];
        for (int i = 0; i < d->nparams; i++) host[i] = (float)d->ready_order[i];
        pl_upload(dev, host, (size_t)d->nparams * sizeof(float));
        pl_broadcast(dev, dev, (size_t)d->nparams, 0, d->comm, NULL);
        pl_download(host, dev, (size_t)d->nparams * sizeof(float));
        pl_free(dev);
        int order[DDP_MAX_PARAMS];
        for (int i = 0; i < d->nparams; i++) order[i] = (int)host[i];
        ddp_build_buckets(d, order);
        d->rebuilt = true;
    }
    if (d->iteration == 0) d->nready = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        d->buckets[b].ready = 0;
        d->buckets[b].launched = false;
    }
    d->next_launch = 0;
}

void ddp_grad_ready(ddp_state *d, int i) {
    if (d->iteration == 0 && d->nready < d->nparams) d->ready_order[d->nready++] = i;
    if (d->mode == DDP_NAIVE || !d->sync) return;
    d->buckets[d->bucket_of[i]].ready++;
    if (d->mode != DDP_OVERLAP) return;
    /* strictly in bucket order: a full bucket waits for the earlier ones */
    while (d->next_launch < d->nbuckets &&
           d->buckets[d->next_launch].ready == d->buckets[d->next_launch].nparams)
        launch_bucket(d, d->next_launch++);
}

void ddp_backward_end(ddp_state *d) {
    if (!d->sync) return;
    if (d->mode == DDP_NAIVE) {
        for (int i = 0; i < d->nparams; i++) launch(d, d->params[i].grad, d->params[i].numel);
    } else {
        while (d->next_launch < d->nbuckets) launch_bucket(d, d->next_launch++);
    }
    pl_event_record(d->comm_done, pl_stream_comm());
    pl_stream_wait_event(NULL, d->comm_done);
    d->iteration++;
}

void ddp_set_sync(ddp_state *d, bool sync) { d->sync = sync; }

void ddp_free(ddp_state *d) {
    pl_device_sync();
    for (int b = 0; b < d->nbuckets; b++) pl_free(d->buckets[b].buf);
    d->nbuckets = 0;
    pl_event_destroy(d->comm_done);
    d->comm_done = NULL;
}
