// expect: pass allreduce.oneshot.c* layer.two.E1n.k1.uniform
// expect-perf: freed
// expect-message: moe_allreduce.c:26
/* Broken on purpose: moe_ar_free gives back the input buffer and the accumulator but not the
 * second symmetric buffer. The results are right; the leak check names the line of the
 * student's file that made it (pl_sym_malloc's call site, not the harness's). */
#include "moe.h"
#include "../../../solutions/09-moe/moe_layer.c"
#include "../../../solutions/09-moe/moe_router.c"
#define moe_ar_free moe_ar_free_solution
#include "../../../solutions/09-moe/moe_allreduce.c"
#undef moe_ar_free

void moe_ar_free(moe_ar *a) {
    if (!a) return;
    pl_sym_free(a->in); /* the bug: a->res stays */
    pl_free(a->acc);
    free(a);
}
