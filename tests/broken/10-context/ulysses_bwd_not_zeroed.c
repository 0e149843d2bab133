// expect: wrong ulysses_bwd.*
/* Broken on purpose: the head-split gradient buffers are handed to kern_flash_block_backward
 * straight from pl_malloc, but the kernel adds (+=) to what they hold: their previous
 * contents (here the poison a fresh allocation holds in a graded run) end up in dq, dk, dv.
 * The solution's code, with every zero fill of cp_ulysses_backward skipped. */
#include "context.h"

static int in_backward; /* inside cp_ulysses_backward */
static void fill_but_not_zeros(float *p, float value, size_t count, pl_stream *s) {
    if (!(in_backward && value == 0.0f)) pl_fill(p, value, count, s);
}

#define cp_ulysses_backward cp_ulysses_backward_solution
#define pl_fill fill_but_not_zeros
#include "../../../solutions/10-context/context.c"
#undef pl_fill
#undef cp_ulysses_backward

void cp_ulysses_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *dout,
                         float *dq, float *dk, float *dv, pl_stream *s) {
    in_backward = 1;
    cp_ulysses_backward_solution(c, q, k, v, dout, dq, dk, dv, s);
    in_backward = 0;
}
