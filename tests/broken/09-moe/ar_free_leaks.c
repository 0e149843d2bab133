// expect: pass allreduce.oneshot.c* layer.two.E1n.k1.uniform
// expect-perf: freed
/* Broken on purpose: moe_ar_free gives back the two symmetric buffers and the handle but
 * not the local accumulator (max_count + 1 floats of device memory): every all-reduce case
 * leaves it behind, which the leak check reports with the line that allocated it. The
 * results are right. */
#include "moe.h"
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_router.c"
#define moe_ar_free moe_ar_free_solution
#include "../../../solutions/09-moe/moe_allreduce.c"
#undef moe_ar_free

void moe_ar_free(moe_ar *a) {
    if (!a) return;
    pl_sym_free(a->in);
    pl_sym_free(a->res);
    free(a); /* the bug: a->acc is never freed */
}
