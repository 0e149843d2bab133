// expect: wrong ring.*
/* Broken on purpose: each step computes the block it holds and only then posts the
 * exchange of the next one. The outputs and the traffic are right, but the transfer can
 * never hide under a block's computation: on a GPU every step costs compute plus
 * transfer instead of the larger of the two. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward
#define RING_COMPUTE_FIRST 1
#include "ring_template.h"
