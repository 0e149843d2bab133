// expect: wrong allreduce.twoshot.*
/* Broken on purpose: moe_allreduce_twoshot reduces the whole vector from every rank, as the
 * one-shot does, and then still writes its chunk to every peer: bit-identical results, but
 * each rank combines (n - 1) * count elements instead of its own chunk of about count / n
 * from each rank. */
#include "moe.h"
#define moe_allreduce_twoshot moe_allreduce_twoshot_solution
#include "../../../solutions/09-moe/moe_allreduce.c"
#undef moe_allreduce_twoshot
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_router.c"

void moe_allreduce_twoshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s) {
    PL_CHECK(count <= a->max, "moe_allreduce_twoshot: count above moe_ar_create's max_count");
    int n = pl_comm_size(a->comm), me = pl_comm_rank(a->comm);
    size_t base = count / (size_t)n, extra = count % (size_t)n;
    size_t lo = (size_t)me * base + ((size_t)me < extra ? (size_t)me : extra), len = base + ((size_t)me < extra);
    pl_copy(a->in, in, count * sizeof(float), s);
    pl_sym_barrier(s);
    reduce_from_peers(a, a->acc, 0, count, s); /* the bug: the whole vector */
    for (int r = 0; r < n; r++)
        pl_copy((float *)pl_sym_peer_ptr(a->res, r) + lo, a->acc + lo, len * sizeof(float), s);
    pl_sym_barrier(s);
    pl_copy(out, a->res, count * sizeof(float), s);
}
