// expect: wrong schedule.1f1b
/* Broken on purpose: 1F1B's generator wants room for one action more than it writes ("cap
 * must exceed the length", as if the list ended in a terminator). Every list it makes is
 * right, and an array of pp_schedule_length actions, the size the header promises is
 * enough, gets PP_ERR_CAPACITY. */
#define pp_schedule_1f1b pp_schedule_1f1b_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_schedule_1f1b

int pp_schedule_1f1b(int p, int s, int m, pp_action *out, int cap) {
    if (p >= 1 && s >= 0 && s < p && m >= 1 && cap == pp_schedule_length(PP_1F1B, m, 1))
        return PP_ERR_CAPACITY; /* the bug */
    return pp_schedule_1f1b_solution(p, s, m, out, cap);
}
