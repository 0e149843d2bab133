// expect: error ring.contig.causal.mha.*
// np: 3
/* Broken on purpose: one receive buffer instead of two. From the second step on, the next
 * block is received into the buffer the held block is sent (and computed) from. The
 * operations of a group run at once, as on NCCL, so the harness stops the run with an
 * error naming the receive that writes what the same group sends; on a GPU it would be a
 * race that corrupts the block. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward
#define RING_BUFFERS(n) 1
#include "ring_template.h"
