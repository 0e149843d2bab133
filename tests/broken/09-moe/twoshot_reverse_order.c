// expect: wrong allreduce.twoshot.*
/* Broken on purpose: the two-shot owner adds the ranks' chunks from the last rank down.
 * The sum is right up to rounding, but not the rank-order sum the handout fixes, which
 * every rank (and the one-shot) must reproduce bit for bit. */
#include "moe.h"
#define moe_allreduce_twoshot moe_allreduce_twoshot_solution
#include "../../../solutions/09-moe/moe_allreduce.c"
#undef moe_allreduce_twoshot
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_layer.c"

void moe_allreduce_twoshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s) {
    int n = pl_comm_size(a->comm), me = pl_comm_rank(a->comm);
    size_t base = count / (size_t)n, extra = count % (size_t)n;
    size_t lo = (size_t)me * base + ((size_t)me < extra ? (size_t)me : extra), len = base + ((size_t)me < extra);
    pl_copy(a->in, in, count * sizeof(float), s);
    pl_sym_barrier(s);
    pl_copy(a->acc, (const float *)pl_sym_peer_ptr(a->in, n - 1) + lo, len * sizeof(float), s);
    for (int r = n - 2; r >= 0; r--) pl_reduce_local(a->acc, (const float *)pl_sym_peer_ptr(a->in, r) + lo, len, PL_SUM, s);
    for (int r = 0; r < n; r++) pl_copy((float *)pl_sym_peer_ptr(a->res, r) + lo, a->acc, len * sizeof(float), s);
    pl_sym_barrier(s);
    pl_copy(out, a->res, count * sizeof(float), s);
}
