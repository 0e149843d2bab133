// expect: wrong ring_bwd.*
/* Broken on purpose: the backward stops after its n steps. The gradients a rank holds then
 * are complete, but they are those of the block of rank me + 1, which it keeps as its own:
 * the last exchange that brings every block's dK and dV home is missing. */
#include "context.h"
#define cp_ring_backward cp_ring_backward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_backward
#define BWD_SEND_HOME 0
#include "bwd_template.h"
