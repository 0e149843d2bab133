// expect: wrong ring.contig.causal.*
// np: 3
/* Broken on purpose: blocks travel backwards (sent to rank me - 1, received from me + 1)
 * while the loop still takes the block of step t to be rank (me - t)'s: with three ranks
 * or more the positions (and so the mask and the sizes) belong to another rank's block. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward
#define RING_NEXT(me, n) (((me) - 1 + (n)) % (n))
#define RING_PREV(me, n) (((me) + 1) % (n))
#include "ring_template.h"
