// expect: pass buckets.* equal.naive
// expect-perf: freed
/* Broken on purpose: ddp_free forgets the buckets' buffers: every DDP that is freed leaks
 * them. */
#define ddp_free ddp_free_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_free
void ddp_free(ddp_state *d) {
    pl_device_sync();
    d->nbuckets = 0; /* the bug: the buffers are not freed first */
    pl_event_destroy(d->comm_done);
    d->comm_done = NULL;
}
