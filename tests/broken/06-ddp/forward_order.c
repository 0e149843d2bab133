// expect: wrong buckets.*
/* Broken on purpose: buckets are built in registration (forward) order, so the first
 * bucket waits for the gradients backward produces last. */
#define ddp_init ddp_init_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_init
void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm) {
    ddp_init_solution(d, params, nparams, DDP_NAIVE, bucket_cap_mb, first_bucket_cap_mb, comm);
    d->mode = mode;
    if (mode == DDP_NAIVE) return;
    int order[DDP_MAX_PARAMS];
    for (int i = 0; i < nparams; i++) order[i] = i; /* the bug */
    ddp_build_buckets(d, order);
}
