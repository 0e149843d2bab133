// expect: wrong buckets.*
/* Broken on purpose: after the buckets are built, b1's gradient is pointed at b2's slot,
 * so two parameters write one gradient and b1's own slot is never written. */
#define ddp_init ddp_init_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_init
void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm) {
    ddp_init_solution(d, params, nparams, mode, bucket_cap_mb, first_bucket_cap_mb, comm);
    if (mode != DDP_NAIVE && nparams > 3) params[1].grad = params[3].grad; /* the bug */
}
