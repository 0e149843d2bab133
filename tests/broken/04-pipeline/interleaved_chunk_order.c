// expect: wrong schedule.interleaved
/* Broken on purpose: the interleaved backwards visit the chunks in the forward order
 * (chunk 0 first) instead of the reverse, so a stage waits for gradients that the later
 * chunks have not produced yet and the steady state falls apart. */
#define pp_schedule_interleaved pp_schedule_interleaved_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_schedule_interleaved

static pp_action nth(int p, int v, int k, pp_kind kind) {
    int in_group = k % (p * v);
    return (pp_action){kind, (k / (p * v)) * p + k % p, in_group / p}; /* the bug: never reversed */
}

int pp_schedule_interleaved(int p, int s, int m, int v, pp_action *out, int cap) {
    if (v < 1 || v > PP_MAX_CHUNKS) return PP_ERR_CHUNKS;
    int rc = check_args(p, s, m, 2 * m * v, cap), n = 0;
    if (rc) return rc;
    if (m % p != 0) return PP_ERR_DIVIDE;
    int total = m * v, w = min_int(2 * (p - s - 1) + (v - 1) * p, total);
    for (int k = 0; k < w; k++) out[n++] = nth(p, v, k, PP_F);
    for (int i = 0; i < total - w; i++) {
        out[n++] = nth(p, v, w + i, PP_F);
        out[n++] = nth(p, v, i, PP_B);
    }
    for (int i = total - w; i < total; i++) out[n++] = nth(p, v, i, PP_B);
    return n;
}
