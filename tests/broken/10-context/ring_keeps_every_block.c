// expect: wrong ring.*
// np: 4
/* Broken on purpose: every block received is kept in a buffer of its own until the end
 * (n buffers): right outputs, right traffic, but the memory of the whole sequence's keys
 * and values on every rank, which is what context parallelism exists to avoid. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward
#define RING_BUFFERS(n) (n)
#include "ring_template.h"
