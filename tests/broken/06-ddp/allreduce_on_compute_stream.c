// expect: wrong overlap.overlap
// expect-message: issued on the compute stream
/* Broken on purpose: every bucket's all-reduce goes on the compute stream ("in order, no
 * events needed"). Launched from the right ddp_grad_ready call, so the issue order looks
 * like overlap, and every result is right; but on a GPU the rest of backward queues behind
 * each all-reduce and nothing is hidden (the cost model's replay: 0%). */
#include "pl.h" /* declared first: the macro below replaces only the solution's calls */
#define pl_stream_comm() pl_stream_compute()
#include "../../../solutions/06-ddp/ddp.c"
