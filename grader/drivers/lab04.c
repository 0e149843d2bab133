/* lab04.c - the driver of Lab 4 (pipeline parallelism): flags, the plan of cases, and the
 * cases that need no communication at all.
 *
 *   schedule.<s>   every stage's list for p = 1..8, m in {1, p-1, p, 2p, 4p+1}, v in
 *                  {1, 2, 3} (interleaved): the rules (every action once, B after its F, W
 *                  after its B, the warm-up length, no stage waiting forever) and then
 *                  action by action against the driver's own generator (lab04_sched.c)
 *   clock.<s>      the same lists on the logical clock (F = 1, B = 2 ticks; zero bubble
 *                  F = B = W = 1): makespan and idle ticks of every stage, and the peak of
 *                  stashed micro-batches per stage, against the closed forms; bubble_ratio
 *   errors.config, errors.schedule   bad input: the codes of pp_config_check and of the
 *                  generators
 * The cases that run pp_execute (step, traffic, memory, order, recompute, errors.plan)
 * are in lab04_run.c; the modes in lab04_modes.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"

int g_T = 8, g_b = 2, g_C = 32, g_H = 4, g_F = 64, g_V = 64, g_L = 16, g_v = 2, g_slack = 8;
double g_lr = 0.1;
uint64_t g_seed;
static const char *g_profile = "dgx-h100";

gpt_config model_config(int batch) {
    return (gpt_config){.seq = g_T, .batch = batch, .hidden = g_C, .heads = g_H, .ffn = g_F, .vocab = g_V, .max_pos = g_T};
}

void run_shape(pp_schedule_kind k, int p, int *m, int *v) {
    *v = 1;
    *m = 2 * p + 1;
    if (k == PP_INTERLEAVED) {
        *m = 2 * p;
        *v = g_v * p <= g_L ? g_v : g_L / p;
    }
}

/* ==================================================================================== */
/* The configurations every schedule case walks                                           */
/* ==================================================================================== */

/* p = 1..8, m in {1, p-1, p, 2p, 4p+1} (each once), v in {1, 2, 3} for interleaving. */
static int shapes_of(pp_schedule_kind k, shape *out) {
    int n = 0;
    for (int p = 1; p <= 8; p++) {
        int ms[5] = {1, p - 1, p, 2 * p, 4 * p + 1};
        for (int i = 0; i < 5; i++) {
            bool dup = ms[i] < 1;
            for (int j = 0; j < i; j++) dup |= ms[j] == ms[i];
            if (dup) continue;
            for (int v = 1; v <= (k == PP_INTERLEAVED ? 3 : 1); v++) out[n++] = (shape){p, ms[i], v};
        }
    }
    return n;
}

static int student_schedule(pp_schedule_kind k, int p, int s, int m, int v, pp_action *out, int cap) {
    switch (k) {
    case PP_GPIPE: return pp_schedule_gpipe(p, s, m, out, cap);
    case PP_1F1B: return pp_schedule_1f1b(p, s, m, out, cap);
    case PP_INTERLEAVED: return pp_schedule_interleaved(p, s, m, v, out, cap);
    default: return pp_schedule_zbh1(p, s, m, out, cap);
    }
}

/* Every stage's list from the student's generator into pl; false with why on an error
 * code, a count that does not fit, or a write past the count. */
bool student_plan(pp_schedule_kind k, shape sh, pp_plan *pl, char *why, size_t len) {
    int need = pp_schedule_length(k, sh.m, sh.v), cap = need + 4;
    memset(pl, 0, sizeof *pl);
    pl->stages = sh.p;
    for (int s = 0; s < sh.p; s++) {
        pp_action *a = malloc((size_t)cap * sizeof *a);
        PL_CHECK(a != NULL, "out of host memory");
        for (int i = 0; i < cap; i++) a[i] = (pp_action){(pp_kind)-1, -7, -7};
        pl->acts[s] = a;
        int n = student_schedule(k, sh.p, s, sh.m, sh.v, a, cap);
        pl->count[s] = n > 0 ? n : 0;
        if (n < 0) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: pp_schedule_%s returned %d (%s)", sh.p, sh.m, sh.v, s,
                     SCHED_NAMES[k], n, pp_error_string(n));
            return false;
        }
        if (n > cap || (n < cap && a[n].mb != -7)) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: returned %d but wrote past it", sh.p, sh.m, sh.v, s, n);
            pl->count[s] = n > cap ? cap : n;
            return false;
        }
    }
    return true;
}

/* ==================================================================================== */
/* schedule.<s>                                                                           */
/* ==================================================================================== */

/* One shape: the DIVIDE error where m is not a multiple of p, else every stage's list
 * against the rules, the reference and the clock. False with why. */
static bool shape_lists(pp_schedule_kind k, shape sh, char *why, size_t len) {
    int need = pp_schedule_length(k, sh.m, sh.v);
    pp_action *ref = malloc((size_t)need * sizeof *ref);
    PL_CHECK(ref != NULL, "out of host memory");
    if (k == PP_INTERLEAVED && sh.m % sh.p) {
        int rc = pp_schedule_interleaved(sh.p, 0, sh.m, sh.v, ref, need);
        if (rc != PP_ERR_DIVIDE)
            snprintf(why, len, "p=%d m=%d v=%d: returned %d, expected PP_ERR_DIVIDE (m is not a multiple of p)", sh.p, sh.m, sh.v, rc);
        free(ref);
        return rc == PP_ERR_DIVIDE;
    }
    pp_plan pl;
    pp_clock ck = {0};
    bool ok = student_plan(k, sh, &pl, why, len);
    for (int s = 0; ok && s < sh.p; s++) {
        char rule[200];
        if (!list_rules(k, sh.p, s, sh.m, sh.v, pl.acts[s], pl.count[s], rule, sizeof rule)) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: %s", sh.p, sh.m, sh.v, s, rule);
            ok = false;
        }
        int nr = ref_schedule(k, sh.p, s, sh.m, sh.v, ref);
        for (int j = 0; ok && j < nr; j++)
            if (memcmp(&ref[j], &pl.acts[s][j], sizeof ref[j])) {
                char got[32], want[32];
                action_name(pl.acts[s][j], sh.v, got, sizeof got);
                action_name(ref[j], sh.v, want, sizeof want);
                snprintf(why, len, "p=%d m=%d v=%d stage %d: action %d is %s, expected %s", sh.p, sh.m, sh.v, s, j, got, want);
                ok = false;
            }
    }
    if (ok && !clock_run(&pl, sh.v, &ck)) snprintf(why, len, "p=%d m=%d v=%d: %s", sh.p, sh.m, sh.v, ck.why), ok = false;
    clock_free(&ck);
    free(ref);
    plan_free(&pl);
    return ok;
}

static void schedule_check(drv_case *c) {
    pp_schedule_kind k = (pp_schedule_kind)c->arg[0];
    shape sh[160];
    int n = shapes_of(k, sh), lists = 0;
    char why[300] = "";
    for (int i = 0; i < n && shape_lists(k, sh[i], why, sizeof why); i++)
        lists += k == PP_INTERLEAVED && sh[i].m % sh[i].p ? 0 : sh[i].p;
    drv_num(c, "lists", lists);
    if (why[0]) drv_fail(c, "%s", why);
    else drv_note(c, "%d stage lists (p 1..8, %d shapes) keep the rules and equal the reference", lists, n);
}

/* ==================================================================================== */
/* clock.<s>                                                                              */
/* ==================================================================================== */

/* Stashed micro-batches at most, in list order: a forward adds one, the pass that frees
 * its activations (B, or W in zero bubble) removes it. */
static int list_peak(const pp_action *a, int n) {
    int cur = 0, peak = 0;
    bool split = false;
    for (int i = 0; i < n; i++) split |= a[i].kind == PP_W;
    for (int i = 0; i < n; i++) {
        if (a[i].kind == PP_F && ++cur > peak) peak = cur;
        if (a[i].kind == (split ? PP_W : PP_B)) cur--;
    }
    return peak;
}

/* One shape on the clock: makespan, idle ticks and peak stash of every stage against the
 * closed forms. False with why; *ratio = theory / clock bubble; at p = 4, m = 8 the
 * worked example into worked[160] (unless NULL). */
static bool shape_clock(pp_schedule_kind k, shape sh, double *ratio, char *worked, char *why, size_t len) {
    pp_plan pl;
    pp_clock ck = {0};
    size_t wlen = 160;
    bool ok = student_plan(k, sh, &pl, why, len);
    int T, idle;
    ref_theory(k, sh.p, sh.m, sh.v, &T, &idle);
    if (ok && !clock_run(&pl, sh.v, &ck)) snprintf(why, len, "p=%d m=%d v=%d: %s", sh.p, sh.m, sh.v, ck.why), ok = false;
    else if (ok) {
        double theory = (double)idle / T, got = (double)(ck.makespan - ck.busy[0]) / ck.makespan;
        *ratio = got > 0 ? theory / got : theory > 0 ? 0 : 1;
        if (ck.makespan != T)
            snprintf(why, len, "p=%d m=%d v=%d: the clock ends at tick %d, the schedule's length is %d", sh.p, sh.m, sh.v, ck.makespan, T);
        for (int s = 0; s < sh.p && !why[0]; s++) {
            int want = ref_peak(k, sh.p, s, sh.m, sh.v), peak = list_peak(pl.acts[s], pl.count[s]);
            if (ck.makespan - ck.busy[s] != idle)
                snprintf(why, len, "p=%d m=%d v=%d stage %d: idle %d of %d ticks, expected %d", sh.p, sh.m, sh.v, s,
                         ck.makespan - ck.busy[s], ck.makespan, idle);
            else if (peak != want)
                snprintf(why, len, "p=%d m=%d v=%d stage %d: %d micro-batches stashed at most, expected %d", sh.p, sh.m, sh.v, s, peak, want);
        }
        ok = !why[0];
        if (ok && worked && sh.p == 4 && sh.m == 8) {
            int w = snprintf(worked, wlen, "p=4 m=8%s: %d ticks, bubble %d/%d, peak stash [", sh.v > 1 ? " v=2" : "", ck.makespan,
                             ck.makespan - ck.busy[0], ck.makespan);
            for (int s = 0; s < 4; s++) w += snprintf(worked + w, wlen - (size_t)w, "%s%d", s ? "," : "", list_peak(pl.acts[s], pl.count[s]));
            snprintf(worked + w, wlen - (size_t)w, "]");
        }
    }
    clock_free(&ck);
    plan_free(&pl);
    return ok;
}

static void clock_check(drv_case *c) {
    pp_schedule_kind k = (pp_schedule_kind)c->arg[0];
    shape sh[160];
    int n = shapes_of(k, sh), checked = 0;
    double worst = 1.0;
    char why[300] = "", worked[160] = "";
    for (int i = 0; i < n && !why[0]; i++) {
        double ratio = 1;
        if (k == PP_INTERLEAVED && sh[i].m % sh[i].p) continue;
        checked += shape_clock(k, sh[i], &ratio, sh[i].v == (k == PP_INTERLEAVED ? 2 : 1) ? worked : NULL, why, sizeof why);
        if (ratio < worst) worst = ratio;
    }
    drv_num(c, "bubble_ratio", why[0] ? 0 : worst);
    drv_num(c, "shapes", checked);
    int T, idle;
    ref_theory(PP_1F1B, 4, 8, 1, &T, &idle); /* zero bubble's yardstick, on its own clock */
    if (why[0]) drv_fail(c, "%s", why);
    else if (k == PP_ZB_H1)
        drv_note(c, "%d shapes as the formulas; %s; 1F1B on the same clock (its backward B + W = 2 ticks): %d ticks, %d idle, peak %d: "
                    "a third of the bubble for the same peak", checked, worked, T, idle, ref_peak(PP_1F1B, 4, 0, 8, 1));
    else drv_note(c, "%d shapes: makespan, idle ticks and peak stash as the formulas; %s", checked, worked);
}

/* ==================================================================================== */
/* errors.*                                                                               */
/* ==================================================================================== */

static void errors_config_check(drv_case *c) {
    struct {
        pp_config c;
        int want;
        const char *what;
    } T[] = {
        {{2, 4, 1, 4, PP_1F1B, false}, PP_OK, "p 2, m 4, L 4, 1F1B"},
        {{2, 4, 2, 4, PP_INTERLEAVED, false}, PP_OK, "interleaved p 2, m 4, v 2, L 4"},
        {{5, 4, 1, 4, PP_1F1B, false}, PP_ERR_STAGES, "p 5 > L 4"},
        {{0, 4, 1, 4, PP_GPIPE, false}, PP_ERR_STAGES, "p 0"},
        {{2, 0, 1, 4, PP_ZB_H1, false}, PP_ERR_MICRO, "m 0"},
        {{2, 3, 2, 8, PP_INTERLEAVED, false}, PP_ERR_DIVIDE, "interleaved m 3 with p 2"},
        {{2, 4, 3, 4, PP_INTERLEAVED, false}, PP_ERR_CHUNKS, "v 3 * p 2 > L 4"},
        {{2, 4, 2, 8, PP_1F1B, false}, PP_ERR_CHUNKS, "v 2 without interleaving"},
        {{2, 4, 0, 8, PP_INTERLEAVED, false}, PP_ERR_CHUNKS, "v 0"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        int rc = pp_config_check(&T[i].c);
        if (rc != T[i].want) {
            drv_fail(c, "pp_config_check(%s) returned %d (%s), expected %d (%s)", T[i].what, rc, pp_error_string(rc), T[i].want,
                     pp_error_string(T[i].want));
            return;
        }
    }
    drv_note(c, "%zu configurations: the right code for each", sizeof T / sizeof T[0]);
}

static void errors_schedule_check(drv_case *c) {
    pp_action a[64];
    struct {
        pp_schedule_kind k;
        int p, s, m, v, cap, want;
        const char *what;
    } T[] = {
        {PP_GPIPE, 2, 0, 0, 1, 64, PP_ERR_MICRO, "gpipe m 0"},
        {PP_1F1B, 2, 2, 4, 1, 64, PP_ERR_STAGES, "1f1b stage 2 of 2"},
        {PP_1F1B, 2, -1, 4, 1, 64, PP_ERR_STAGES, "1f1b stage -1"},
        {PP_ZB_H1, 0, 0, 4, 1, 64, PP_ERR_STAGES, "zbh1 p 0"},
        {PP_ZB_H1, 2, 1, -3, 1, 64, PP_ERR_MICRO, "zbh1 m -3"},
        {PP_INTERLEAVED, 2, 0, 3, 2, 64, PP_ERR_DIVIDE, "interleaved m 3 with p 2"},
        {PP_INTERLEAVED, 2, 0, 4, 0, 64, PP_ERR_CHUNKS, "interleaved v 0"},
        {PP_1F1B, 2, 0, 4, 1, 7, PP_ERR_CAPACITY, "1f1b m 4 in 7 actions"},
        {PP_ZB_H1, 3, 1, 5, 1, 14, PP_ERR_CAPACITY, "zbh1 m 5 in 14 actions"},
        {PP_INTERLEAVED, 2, 1, 4, 2, 15, PP_ERR_CAPACITY, "interleaved m 4 v 2 in 15 actions"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        int rc = student_schedule(T[i].k, T[i].p, T[i].s, T[i].m, T[i].v, a, T[i].cap);
        if (rc != T[i].want) {
            drv_fail(c, "%s: returned %d (%s), expected %d (%s)", T[i].what, rc, pp_error_string(rc), T[i].want,
                     pp_error_string(T[i].want));
            return;
        }
    }
    drv_note(c, "%zu bad calls: the right code for each, nothing written past the array", sizeof T / sizeof T[0]);
}

/* ==================================================================================== */
/* The plan                                                                               */
/* ==================================================================================== */

static void plan_sched(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < PP_NSCHEDULES; k++) drv_plan_add(p, t, "%s.%s", t->name, SCHED_NAMES[k])->arg[0] = k;
}

/* The real runs, planned from the "step" row: per schedule its step, traffic, memory,
 * order and recompute cases (the four rows after it), in their own group, so that a
 * deadlock costs only that schedule. */
static void plan_runs(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < PP_NSCHEDULES; k++)
        for (int j = 0; j < 5; j++) {
            drv_instance *in = drv_plan_add(p, &t[j], "%s.%s", t[j].name, SCHED_NAMES[k]);
            snprintf(in->group, sizeof in->group, "%s", SCHED_NAMES[k]);
            in->arg[0] = k;
        }
}
static void plan_none(const drv_test *t, drv_plan *p) { (void)t, (void)p; }

static const drv_test TESTS[] = {
    {"schedule", "schedule", plan_sched, NULL, NULL, schedule_check, NULL, NULL, NULL, NULL},
    {"clock", "clock", plan_sched, NULL, NULL, clock_check, NULL, NULL, NULL, NULL},
    {"errors.config", "errors", NULL, NULL, NULL, errors_config_check, NULL, NULL, NULL, NULL},
    {"errors.schedule", "errors", NULL, NULL, NULL, errors_schedule_check, NULL, NULL, NULL, NULL},
    {"errors.plan", "errors_plan", NULL, NULL, plan_error_case, NULL, NULL, NULL, NULL, NULL},
    /* these five rows are planned together by the first (plan_runs) */
    {"step", NULL, plan_runs, NULL, run_case, step_check, NULL, NULL, NULL, NULL},
    {"traffic", NULL, plan_none, NULL, run_case, traffic_check, NULL, NULL, NULL, NULL},
    {"memory", NULL, plan_none, NULL, run_case, memory_check, NULL, NULL, NULL, NULL},
    {"order", NULL, plan_none, NULL, run_case, order_check, NULL, NULL, NULL, NULL},
    {"recompute", NULL, plan_none, NULL, recompute_case, recompute_check, NULL, NULL, NULL, NULL},
    {NULL},
};

static void lab4_init(void) {
    g_seed = pl_info()->seed;
    int n = pl_world();
    if (g_L < n) pl_usage_error("--layers %d is fewer than the %d stages: every stage needs a block", g_L, n);
    if (g_C % g_H) pl_usage_error("--hidden %d is not a multiple of --heads %d", g_C, g_H);
    const char *names[2] = {g_profile, "pcie-4gpu"};
    for (int i = 0; i < 2; i++) {
        char err[300];
        g_have_prof[i] = plc_profile_load(&g_prof[i], names[i], err, sizeof err) == 0;
        if (!g_have_prof[i] && i == 0 && strcmp(g_profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    }
    drv_print("# lab04: %d stage(s), device %s; graded steps: GPT T=%d b=%d C=%d H=%d F=%d V=%d, %d blocks, "
              "m = 2p+1 (interleaved: m = 2p, v = %d)\n", n, pl_device_name(pl_info()->device), g_T, g_b, g_C, g_H, g_F, g_V, g_L,
              g_v * n <= g_L ? g_v : g_L / n);
}

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_T, 1, 4096, "T: positions per sequence (default 8)"},
    {"--batch", DRV_INT, &g_b, 1, 4096, "b: sequences per micro-batch (default 2)"},
    {"--hidden", DRV_INT, &g_C, 1, 8192, "C (default 32)"},
    {"--heads", DRV_INT, &g_H, 1, 256, "H, dividing C (default 4)"},
    {"--ffn", DRV_INT, &g_F, 1, 32768, "F: MLP width (default 64)"},
    {"--vocab", DRV_INT, &g_V, 2, 65536, "V (default 64)"},
    {"--layers", DRV_INT, &g_L, 1, 1024, "L blocks, at least the number of stages (default 16)"},
    {"--chunks", DRV_INT, &g_v, 1, PP_MAX_CHUNKS, "v: model chunks per stage of the interleaved runs (default 2)"},
    {"--lr", DRV_DOUBLE, &g_lr, 1e-6, 10, "SGD learning rate of the graded step (default 0.1)"},
    {"--slack", DRV_INT, &g_slack, 0, 1024, "[N, C] exchange buffers allowed beyond the stash bound (default 8)"},
    {"--profile", DRV_STR, &g_profile, 0, 0, "NAME|FILE: cost-model profile of the predictions (default dgx-h100; pcie-4gpu too)"},
    {"--steps", DRV_INT, &g_steps, 1, 100000, "--run train: steps (default 400)"},
    {"--micro", DRV_INT, &g_train_micro, 1, 4096, "--run train: micro-batches per step (default 4; sweep: the largest m)"},
    {"--train-lr", DRV_DOUBLE, &g_train_lr, 1e-6, 100, "--run train: SGD learning rate (default 0.5)"},
    {"--text", DRV_STR, &g_text, 0, 0, "--run train: the text to learn (default /usr/share/common-licenses/GPL-3)"},
    {"--schedule", DRV_STR, &g_schedule, 0, 0, "--run train/bench/sweep: gpipe|1f1b|interleaved|zbh1|all"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"sweep", "bubble and peak stash as m grows, per schedule: logical, theory, measured, predicted; a plot", mode_sweep,
     "4", "scripts/plot-sweep-4.sh"},
    {"train", "a tiny GPT on a real text over the pipeline, its loss curve beside single-rank training; a plot",
     mode_train, "2 4", "scripts/plot-train-4.sh"},
    {"bench", "step time per schedule against one rank doing the same work, bubble, dgx-h100 prediction (make bench LAB=4)",
     mode_bench, "2 4", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "04-pipeline",
    .title = "Lab 4: pipeline parallelism (GPipe, 1F1B, interleaved 1F1B, ZB-H1)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab4_init,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
