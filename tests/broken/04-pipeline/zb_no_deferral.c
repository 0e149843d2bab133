// expect: wrong schedule.zbh1
/* Broken on purpose: every W runs right after its B, as 1F1B's fused backward would. The
 * list is valid and runs, but nothing fills the bubble: ZB-H1 defers stage s's W's by s
 * backward passes. */
#define pp_schedule_zbh1 pp_schedule_zbh1_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_schedule_zbh1

int pp_schedule_zbh1(int p, int s, int m, pp_action *out, int cap) {
    int rc = check_args(p, s, m, 3 * m, cap), n = 0;
    if (rc) return rc;
    int w = min_int(p - s - 1, m);
    for (int i = 0; i < w; i++) put(out, &n, PP_F, i, 0);
    for (int i = 0; i < m; i++) {
        if (i < m - w) put(out, &n, PP_F, w + i, 0);
        put(out, &n, PP_B, i, 0);
        put(out, &n, PP_W, i, 0); /* the bug: not deferred */
    }
    return n;
}
