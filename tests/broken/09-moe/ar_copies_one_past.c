// expect: wrong allreduce.oneshot.*
// np: 2
// expect-message: bytes past the end of an allocation
/* Broken on purpose: an off-by-one. The symmetric buffers hold exactly max_count floats,
 * and the one-shot writes element [count] of its input buffer too (a <= where a < was
 * meant), so a call at the largest count writes 4 bytes past the end of its symmetric
 * allocation: on a GPU into whatever the symmetric heap put next. */
#include "moe.h"
#define moe_ar_create moe_ar_create_solution
#define moe_allreduce_oneshot moe_allreduce_oneshot_solution
#include "../../../solutions/09-moe/moe_allreduce.c"
#undef moe_ar_create
#undef moe_allreduce_oneshot
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_router.c"

moe_ar *moe_ar_create(size_t max_count, pl_comm *comm) {
    moe_ar *a = calloc(1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    a->comm = comm, a->max = max_count;
    a->in = pl_sym_malloc((max_count ? max_count : 1) * sizeof(float));
    a->res = pl_sym_malloc((max_count ? max_count : 1) * sizeof(float));
    a->acc = pl_malloc_floats(max_count + 1);
    return a;
}

void moe_allreduce_oneshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s) {
    if (count == a->max) pl_copy(a->in + count, in, sizeof(float), s); /* the bug: element count */
    moe_allreduce_oneshot_solution(a, in, out, count, s);
}
