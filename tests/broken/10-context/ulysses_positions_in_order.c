// expect: wrong ulysses.zigzag.causal.*
/* Broken on purpose: the gathered sequence is masked as if its tokens stood in order
 * (positions 0, 1, ..., S - 1), which holds for the contiguous layout only: under zig-zag
 * every rank's second chunk comes from the end of the sequence. */
#include "context.h"
#define cp_ulysses_forward cp_ulysses_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ulysses_forward

static int *in_order(const cp_map *m) {
    static int *d;
    static int size;
    if (size < m->S) {
        if (d) pl_free(d);
        int *h = malloc((size_t)m->S * sizeof(int));
        for (int i = 0; i < m->S; i++) h[i] = i;
        d = pl_malloc((size_t)m->S * sizeof(int));
        pl_upload(d, h, (size_t)m->S * sizeof(int));
        free(h);
        size = m->S;
    }
    return d;
}
#define ULY_GATHERED_POS(m) in_order(&(m))
#include "ulysses_template.h"
