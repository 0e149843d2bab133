// expect: wrong buckets.negative
/* Broken on purpose: only a cap of exactly 0 means the default; a negative cap is kept as
 * given ("the caller asked for it"), and since every bucket's size is at least its cap,
 * each bucket closes after its first parameter. The handout says cap_mb <= 0 means the
 * default. (Kept as a cap below one byte here, which closes the buckets the same way.) */
#define ddp_init ddp_init_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_init
void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm);

void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm) {
    ddp_init_solution(d, params, nparams, mode, bucket_cap_mb, first_bucket_cap_mb, comm);
    if (mode == DDP_NAIVE || (bucket_cap_mb >= 0 && first_bucket_cap_mb >= 0)) return;
    /* the bug: a negative cap taken as given */
    if (bucket_cap_mb < 0) d->bucket_cap_mb = 1e-9;
    if (first_bucket_cap_mb < 0) d->first_bucket_cap_mb = 1e-9;
    int order[DDP_MAX_PARAMS];
    for (int i = 0; i < nparams; i++) order[i] = nparams - 1 - i;
    ddp_build_buckets(d, order);
}
