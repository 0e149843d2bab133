// expect: wrong buckets.boundary+half
/* Broken on purpose: the bucket cap compared as a double (cap_mb * 2^20 bytes) instead of
 * PyTorch's whole bytes, int(cap_mb * 2^20): a cap that is not a whole number of bytes
 * closes its bucket one parameter late. */
#define ddp_init ddp_init_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_init

static void build_with_double_cap(ddp_state *d, const int *order) {
    for (int b = 0; b < d->nbuckets; b++) pl_free(d->buckets[b].buf);
    memset(d->buckets, 0, sizeof d->buckets);
    d->nbuckets = 0;
    double bytes = 0;
    for (int k = 0; k < d->nparams; k++) {
        double cap = (d->nbuckets == 1 ? d->first_bucket_cap_mb : d->bucket_cap_mb) * 1048576.0; /* the bug */
        if (d->nbuckets == 0 || bytes >= cap) d->nbuckets++, bytes = 0;
        ddp_bucket *b = &d->buckets[d->nbuckets - 1];
        b->params[b->nparams] = order[k];
        b->offsets[b->nparams++] = b->numel;
        b->numel += d->params[order[k]].numel;
        bytes += (double)d->params[order[k]].numel * sizeof(float);
        d->bucket_of[order[k]] = d->nbuckets - 1;
    }
    for (int b = 0; b < d->nbuckets; b++) {
        ddp_bucket *bk = &d->buckets[b];
        bk->buf = pl_malloc_floats(bk->numel);
        pl_fill(bk->buf, 0, bk->numel, NULL);
        for (int j = 0; j < bk->nparams; j++) d->params[bk->params[j]].grad = bk->buf + bk->offsets[j];
    }
}

void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm) {
    ddp_init_solution(d, params, nparams, mode, bucket_cap_mb, first_bucket_cap_mb, comm);
    if (mode == DDP_NAIVE) return;
    int order[DDP_MAX_PARAMS];
    for (int i = 0; i < nparams; i++) order[i] = nparams - 1 - i;
    build_with_double_cap(d, order);
}
