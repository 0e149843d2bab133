// expect: forbidden ulysses.*
/* Broken on purpose: after gathering, the ranks check that they agree on the sequence
 * length with a library all-reduce: Ulysses' traffic is its four all-to-alls from
 * send/recv, nothing else. */
#include "context.h"
#define cp_ulysses_forward cp_ulysses_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ulysses_forward

static void agree(const cp_config *c) {
    float *x = pl_malloc_floats(1);
    pl_fill(x, (float)c->seq, 1, NULL);
    pl_allreduce(x, x, 1, PL_MAX, c->comm, NULL);
    pl_free(x);
}
#define ULY_AFTER_GATHER(c) agree(c)
#include "ulysses_template.h"
