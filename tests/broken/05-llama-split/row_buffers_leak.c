// expect: pass row.prefill layer.prefill
// expect-perf: freed
/* Broken on purpose: a leak in the row split's teardown. ls_free gives back the weights, the
 * KV cache and the workspace, but not the buffers the row split adds (the workers' broadcast
 * activation and product block, the main rank's gather stage): a free written before the
 * row split grew them. Every logit is right; the per-case leak check reports the bytes and
 * the lines that allocated them. */
#include "llama_split.h"
#define ls_free ls_free_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_free

void ls_free(ls_state *st) {
    if (st) st->xin = st->yblk = st->stage = NULL;
    ls_free_solution(st);
}
