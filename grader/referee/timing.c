/* timing.c - how a referee times its player. Every timed run gets fresh inputs (the test's
 * refresh), poisoned outputs and its checks; the clock runs around the GO command alone,
 * after the inputs are staged and the players have met in a barrier (READY: a rank whose
 * referee is still writing inputs holds nobody's clock); a run's time is the slowest
 * rank's (a relay), divided by the calls it made (drv_batch_sets). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "referee.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define BATCH_SETS_MAX 1024 /* sets a test may declare (drv_batch_run's stride)           */
#define BATCH_PROBE 8        /* calls in the probe run that sizes a batch                  */

void drv_batch_sets(drv_case *c, int sets) {
    PL_CHECK(sets >= 1 && sets <= BATCH_SETS_MAX, "drv_batch_sets: 1 to 1024 sets");
    c->batch_max = sets;
}

int drv_batch_run(const drv_case *c, int run, int k) {
    (void)c;
    return run * BATCH_SETS_MAX + k;
}

/* One timed run of timed(c, which), numbered `run` for refresh and verify, with c->batch
 * calls: the time of one call in microseconds on this rank. */
static double one_run(drv_case *c, const drv_test *t, int which, int run) {
    c->timing = which;
    drv_slots_repoison(c);
    t->refresh(c, run);
    slots_publish(c, -1);
    player_command(CMD_STAGE, (uint32_t)which);
    player_command(CMD_READY, 0);
    double t0 = now_s();
    player_command(CMD_GO, (uint32_t)which | (uint32_t)c->batch << 8);
    double dt = now_s() - t0;
    player_command(CMD_COLLECT, (uint32_t)which);
    slots_verify(c, "a timed run");
    if (t->verify) t->verify(c, run);
    return dt * 1e6 / c->batch;
}

/* The calls per run: 1, or where the test declared sets, enough that a run of the slowest
 * call lasts DRV_BATCH_RUN_US (at most the sets, at most --calls), from one probe run of
 * each call with BATCH_PROBE of them, its slowest rank: the same on every rank. */
static int batch_for(drv_case *c, const drv_test *t, const int *which, int nwhich, int *run) {
    int most = c->batch_max > 1 ? c->batch_max : 1;
    if (g_opt.calls > 0 && g_opt.calls < most) most = g_opt.calls;
    if (most == 1) return 1;
    c->batch = most < BATCH_PROBE ? most : BATCH_PROBE;
    double slowest = 0;
    for (int j = 0; j < nwhich; j++) {
        double us = one_run(c, t, which[j], (*run)++);
        if (us > slowest) slowest = us;
    }
    slowest = drv_max(slowest);
    if (drv_max(drv_failed(c)) > 0) return c->batch; /* a wrong result: the caller says so */
    double k = slowest > 0 ? ceil(DRV_BATCH_RUN_US / slowest) : most;
    return k >= most ? most : k < 1 ? 1 : (int)k;
}

void drv_time_players(drv_case *c, const int *which, int nwhich, int warmup, int iters, pl_timing *out) {
    const drv_test *t = c->inst->test;
    PL_CHECK(t->refresh != NULL, "a timed test needs refresh(): every timed run gets fresh inputs");
    PL_CHECK(nwhich >= 1 && nwhich <= 4, "drv_time_players: 1 to 4 calls");
    if (g_opt.warmup >= 0) warmup = g_opt.warmup;
    if (g_opt.iters > 0) iters = g_opt.iters;
    if (iters < 1) iters = 1;
    double *us = calloc((size_t)iters * (size_t)nwhich, sizeof *us);
    PL_CHECK(us != NULL, "out of host memory");
    int run = 1;
    c->batch = batch_for(c, t, which, nwhich, &run);
    /* all of them on every rank: the players go together. Round k takes the calls in order,
     * the next round in reverse (A B, B A, ...): a burst of load, or a drift, hits each
     * alike */
    for (int k = 0; k < warmup + iters; k++)
        for (int j = 0; j < nwhich; j++, run++) {
            int w = k % 2 ? nwhich - 1 - j : j;
            double dt = one_run(c, t, which[w], run);
            if (k >= warmup) us[(size_t)w * iters + (k - warmup)] = dt;
        }
    /* every rank's referee took the same number of runs unless a check failed somewhere */
    bool bad = drv_max(drv_failed(c)) > 0;
    size_t per = (size_t)iters * (size_t)nwhich;
    double *all = malloc(per * (size_t)c->world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(us, per * sizeof *us, all);
    for (size_t k = 0; k < per; k++) /* the slowest rank defines a run */
        for (int r = 0; r < c->world; r++)
            if (all[(size_t)r * per + k] > us[k]) us[k] = all[(size_t)r * per + k];
    free(all);
    for (int w = 0; w < nwhich; w++) out[w] = bad ? (pl_timing){0} : timing_of(us + (size_t)w * iters, iters);
    free(us);
    if (bad && !drv_failed(c)) drv_fail(c, "a timed run gave a wrong result on another rank");
}

/* The cores this host's ranks may share: the referee's own affinity, or where the launcher
 * bound each rank to fewer cores than there are ranks (mpirun binds to cores only when
 * there are enough of them), its parent's (the launcher's daemon or slurmstepd: what the
 * job was given, taskset and cgroups included). */
static int host_cores(int ranks) {
    cpu_set_t set;
    int own = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (own <= 0 || own >= ranks) return own;
    int parent = sched_getaffinity(getppid(), sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    return parent > own ? parent : own;
}

const char *drv_oversubscribed(void) {
    static char text[120];
    int ranks = referee_local_world(), cores = host_cores(ranks);
    if (cores <= 0 || ranks <= cores) return "";
    snprintf(text, sizeof text, "; oversubscribed: %d ranks on %d core%s of this host", ranks, cores, cores > 1 ? "s" : "");
    return text;
}

/* One host by the launcher's count, and by the player's own MPI where it has one: a player
 * whose world spans hosts skips what needs one (Lab 9's peer pointers), and a launcher that
 * names no local size would otherwise leave the referee expecting it. The player's word can
 * only make this false, which fails cases: nothing to gain by it. */
bool drv_one_host(void) { return referee_local_world() >= g_ref.world && g_ref.player_nodes <= 1; }

pl_timing drv_time_player(drv_case *c, int which, int warmup, int iters) {
    pl_timing tm;
    drv_time_players(c, &which, 1, warmup, iters, &tm);
    return tm;
}
