// expect: wrong nosync
/* Broken on purpose: no_sync is ignored, every micro-step all-reduces (and averages) its
 * gradients. */
#define ddp_set_sync ddp_set_sync_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_set_sync
void ddp_set_sync(ddp_state *d, bool sync) { (void)d, (void)sync; }
