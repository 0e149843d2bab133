// expect: wrong errors.schedule
/* Broken on purpose: the 1F1B generator writes its whole list before it compares its
 * length with the capacity: PP_ERR_CAPACITY comes back, but after writing past the end of
 * the caller's array. */
#include <string.h>

#define pp_schedule_1f1b pp_schedule_1f1b_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_schedule_1f1b
int pp_schedule_1f1b(int p, int s, int m, pp_action *out, int cap) {
    if (m < 1 || m > 4096) return pp_schedule_1f1b_solution(p, s, m, out, cap);
    pp_action all[2 * 4096];
    int n = pp_schedule_1f1b_solution(p, s, m, all, 2 * 4096);
    if (n < 0) return n;
    memcpy(out, all, (size_t)n * sizeof *out); /* the bug: written before the check */
    return n > cap ? PP_ERR_CAPACITY : n;
}
