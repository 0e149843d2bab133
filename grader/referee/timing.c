/* timing.c - how a referee times its player. Every timed run gets fresh inputs (the test's
 * refresh), poisoned outputs and its checks; the clock runs around the GO command alone,
 * after the inputs are staged; a run's time is the slowest rank's (a relay). */
#include <stdlib.h>
#include <time.h>

#include "referee.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

pl_timing drv_time_player(drv_case *c, int which, int warmup, int iters) {
    const drv_test *t = c->inst->test;
    PL_CHECK(t->refresh != NULL, "a timed test needs refresh(): every timed run gets fresh inputs");
    if (g_opt.warmup >= 0) warmup = g_opt.warmup;
    if (g_opt.iters > 0) iters = g_opt.iters;
    if (iters < 1) iters = 1;
    double *us = calloc((size_t)iters, sizeof *us);
    PL_CHECK(us != NULL, "out of host memory");
    for (int k = 0; k < warmup + iters; k++) { /* all of them on every rank: the players go together */
        drv_slots_repoison(c);
        t->refresh(c, k + 1);
        slots_publish(c, -1);
        player_command(CMD_STAGE, (uint32_t)which);
        double t0 = now_s();
        player_command(CMD_GO, (uint32_t)which);
        double dt = now_s() - t0;
        player_command(CMD_COLLECT, (uint32_t)which);
        slots_verify(c, "a timed run");
        if (t->verify) t->verify(c, k + 1);
        if (k >= warmup) us[k - warmup] = dt * 1e6;
    }
    /* every rank's referee took the same number of runs unless a check failed somewhere */
    bool bad = drv_max(drv_failed(c)) > 0;
    double *all = malloc((size_t)iters * (size_t)c->world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(us, (size_t)iters * sizeof *us, all);
    for (int k = 0; k < iters; k++) /* the slowest rank defines a run */
        for (int r = 0; r < c->world; r++)
            if (all[(size_t)r * iters + k] > us[k]) us[k] = all[(size_t)r * iters + k];
    free(all);
    pl_timing tm = bad ? (pl_timing){0} : timing_of(us, iters);
    free(us);
    if (bad && !drv_failed(c)) drv_fail(c, "a timed run gave a wrong result on another rank");
    return tm;
}
