// expect: wrong schedule.1f1b
/* Broken on purpose: 1F1B's warm-up runs p - s forwards instead of p - s - 1, so every
 * stage stashes one micro-batch more than it needs, and its steady state is one step late. */
#define pp_schedule_1f1b pp_schedule_1f1b_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_schedule_1f1b

int pp_schedule_1f1b(int p, int s, int m, pp_action *out, int cap) {
    int rc = check_args(p, s, m, 2 * m, cap), n = 0;
    if (rc) return rc;
    int w = min_int(p - s, m); /* the bug */
    for (int i = 0; i < w; i++) put(out, &n, PP_F, i, 0);
    for (int i = 0; i < m - w; i++) {
        put(out, &n, PP_F, w + i, 0);
        put(out, &n, PP_B, i, 0);
    }
    for (int i = m - w; i < m; i++) put(out, &n, PP_B, i, 0);
    return n;
}
