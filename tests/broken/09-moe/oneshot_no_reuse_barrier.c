// expect: wrong allreduce.oneshot.reuse*
/* Broken on purpose: the one-shot all-reduce has no barrier after its reads. A rank that
 * finishes first starts the next call and overwrites its input buffer while a slower rank
 * is still reading the previous call's values from it: right once, wrong back to back. */
#include "moe.h"
#define moe_allreduce_oneshot moe_allreduce_oneshot_solution
#include "../../../solutions/09-moe/moe_allreduce.c"
#undef moe_allreduce_oneshot
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_layer.c"

void moe_allreduce_oneshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s) {
    pl_copy(a->in, in, count * sizeof(float), s);
    pl_sym_barrier(s);
    reduce_from_peers(a, a->acc, 0, count, s);
    pl_copy(out, a->acc, count * sizeof(float), s); /* the bug: no barrier before the buffer is reused */
}
