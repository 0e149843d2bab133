// expect: wrong ring.*
/* Broken on purpose: the rank's own block (the diagonal one, step 0) is taken for masked
 * and skipped, so no query attends to the keys of its own chunk. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

static void compute_not_own(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                            const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    if (owner != m->me) compute_block(c, m, owner, q, kb, vb, o, lse, ob, lb, s);
}
#define RING_COMPUTE compute_not_own
#include "ring_template.h"
