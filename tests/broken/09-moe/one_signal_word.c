// expect: wrong reuse.one.*
// np: 8
/* Broken on purpose: the one-sided layer keeps one signal word for all its phases (counts,
 * dispatch, combine, and the backward's two) and waits for a running total, n more per
 * phase. Signals from one peer arrive in order, so this holds at two ranks; at more, a peer
 * that finished the counts phase can signal its dispatch rows before a slower peer's counts
 * have landed, the total is reached early, and the rank reads a table or rows that are not
 * there yet. */
#include "moe.h"
#include "pl_sym.h"

static uint64_t *g_word;  /* the layer's signal words (the allocation of 5 of them) */
static uint64_t g_total;  /* signals expected on the shared word so far             */

static void *sym_alloc(size_t bytes, const char *file, int line) {
    void *p = pl_sym_malloc_at(bytes, file, line);
    if (bytes == 5 * sizeof(uint64_t)) g_word = p, g_total = 0;
    return p;
}
static uint64_t *one_word(uint64_t *sig) { return g_word && sig >= g_word && sig < g_word + 5 ? g_word : sig; }
static void wait_total(uint64_t *sig, pl_cmp cmp, uint64_t value, pl_stream *s) {
    if (one_word(sig) != g_word) {
        pl_sym_wait_until(sig, cmp, value, s);
        return;
    }
    g_total += (uint64_t)pl_world(); /* the bug: one running total across phases */
    pl_sym_wait_until(g_word, cmp, g_total, s);
}

#undef pl_sym_malloc
#define pl_sym_malloc(bytes) sym_alloc((bytes), __FILE__, __LINE__)
#define pl_sym_put_signal(dst, src, bytes, sig, v, op, pe, s) pl_sym_put_signal(dst, src, bytes, one_word(sig), v, op, pe, s)
#define pl_sym_wait_until(sig, cmp, v, s) wait_total(sig, cmp, v, s)
#include "../../../solutions/09-moe/moe_layer.c"
#undef pl_sym_put_signal
#undef pl_sym_wait_until
#undef pl_sym_malloc
#define pl_sym_malloc(bytes) pl_sym_malloc_at((bytes), __FILE__, __LINE__)
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"
