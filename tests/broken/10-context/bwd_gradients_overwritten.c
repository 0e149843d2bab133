// expect: wrong ring_bwd.*
/* Broken on purpose: the gradients that arrive with a block are zeroed before this rank
 * adds its share, so each block comes home with the share of the last rank it visited
 * only (overwritten instead of accumulated). */
#include "context.h"
#define cp_ring_backward cp_ring_backward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_backward
#define BWD_KEEP_INCOMING 0
#include "bwd_template.h"
