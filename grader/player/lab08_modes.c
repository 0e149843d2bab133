/* lab08_modes.c (player) - Lab 8's modes: the student's program, run without a referee.
 *   plan   (make lab-8 RUN=plan [PROFILE=..] [ARGS="--model 145.6B --top 10"]) the planner
 *          (common/pl_planner.h): the fastest configurations of a model that fit, with
 *          time, memory per GPU and TFLOP/s per GPU, beside the published one.
 *   bench  (make bench LAB=8) the ten rows of Table 1 of the Megatron-LM paper (Narayanan
 *          et al., SC21) predicted on dgx-a100 at their published configurations: one
 *          `ratio` line each, predicted / published TFLOP/s per GPU; then the lab's tiny
 *          GPT stepped here at every (t, p, d) of the world and the planner's prediction
 *          of the same step on this-machine beside the measurement.
 * Nothing here is calibrated to the table: one profile, its numbers documented in
 * common/profiles/dgx-a100.profile and docs/cost-model.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08_player.h"
#include "pl_instrument.h" // defines: pl_host_allreduce
#include "pl_planner.h"    // defines: plp_* (the planner)

/* Table 1 with the configuration of each row as the paper's scripts ran it
 * (examples/sc21/run_table_1.sh of Megatron-LM: micro-batch size and layers per virtual
 * stage; every row with full activation recomputation and Megatron's default dropout).
 * V = 51200, s = 2048. */
typedef struct {
    const char *name;
    int heads, hidden, layers, t, p, gpus, batch, micro, v;
    double tflops; /* published, per GPU */
} table1_row;

static const table1_row TABLE1[] = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 1, 137},       {"3.6B", 32, 3072, 30, 2, 1, 64, 512, 16, 1, 138},
    {"7.5B", 32, 4096, 36, 4, 1, 128, 512, 16, 1, 142},      {"18.4B", 48, 6144, 40, 8, 1, 256, 1024, 8, 1, 135},
    {"39.1B", 64, 8192, 48, 8, 2, 512, 1536, 4, 1, 138},     {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 2, 3, 140},
    {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 2, 2, 148},  {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 1, 2, 155},
    {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 1, 3, 163}, {"1T", 160, 25600, 128, 8, 64, 3072, 3072, 1, 1, 163},
};
#define NROWS ((int)(sizeof TABLE1 / sizeof TABLE1[0]))

static plp_model row_model(const table1_row *r) { return (plp_model){r->layers, r->hidden, r->heads, 51200, 2048, 0, true}; }
static plp_config row_config(const table1_row *r) {
    return (plp_config){r->t, r->p, r->gpus / (r->t * r->p), r->v, r->micro, true, false};
}

static void config_name(const plp_config *c, char *out, size_t len) {
    snprintf(out, len, "t%d p%d d%d v%d b%d%s%s", c->t, c->p, c->d, c->v, c->b, c->recompute ? " recompute" : "",
             c->zero1 ? " zero1" : "");
}

/* "GEMMs 71%, tensor all-reduces 6%, ..." : the terms above 1% */
static void terms_line(const plp_estimate *e, char *out, size_t len) {
    int w = 0;
    out[0] = '\0';
    for (int i = 0; i < PLP_NTERMS && w < (int)len; i++)
        if (e->term[i] > 0.01 * e->time)
            w += snprintf(out + w, len - (size_t)w, "%s%s %.0f%%", w ? ", " : "", plp_term_name((plp_term)i), 100 * e->term[i] / e->time);
}

static void print_estimate(const plp_estimate *e, const char *mark) {
    char name[64], terms[300];
    config_name(&e->cfg, name, sizeof name);
    terms_line(e, terms, sizeof terms);
    drv_say("  %-32s m %5d  %9.4g s  %6.4g TFLOP/s/GPU  %6.4g GB  bubble %5.3f  %s%s\n", name, e->m, e->time, e->tflops,
            e->mem / 1e9, plp_bubble(e->cfg.p, e->cfg.v, e->m), terms, mark);
}

static bool load_profile(const char *name, plc_profile *p, bool required) {
    char err[300];
    if (plc_profile_load(p, name, err, sizeof err) == 0) return true;
    if (required) fprintf(stderr, "error: --profile: %s\n", err);
    else drv_say("# profile %s: %s\n", name, err);
    return false;
}

/* ==================================================================================== */
/* plan                                                                                   */
/* ==================================================================================== */

static void plan_one(const plc_profile *prof, const char *title, const plp_model *m, int gpus, int B, const plp_config *published,
                     int top) {
    char mem[40];
    if (prof->mem_capacity > 0) snprintf(mem, sizeof mem, "%.0f GB", prof->mem_capacity / 1e9);
    else snprintf(mem, sizeof mem, "memory not given");
    drv_say("# %s: l %d, h %d, a %d, V %d, s %d on %d GPU(s) of %s (%d per node, %s), %d sequences per iteration\n", title,
            m->layers, m->hidden, m->heads, m->vocab, m->seq, gpus, prof->name, prof->gpus_per_node, mem, B);
    plp_estimate *best = calloc((size_t)top, sizeof *best);
    PL_CHECK(best != NULL, "out of host memory");
    size_t n = plp_search(prof, m, gpus, B, best, (size_t)top);
    if (n == 0) drv_say("  no configuration fits (memory, or no t, p, micro-batch divides the model and the batch)\n");
    for (size_t i = 0; i < n && i < (size_t)top; i++) print_estimate(&best[i], i == 0 ? "  <- best" : "");
    if (n > (size_t)top) drv_say("  ... %zu configurations fit in all\n", n);
    if (published) {
        char why[200];
        plp_estimate e;
        if (plp_check(m, published, B, why, sizeof why) != 0) {
            drv_say("  published configuration: %s\n", why);
        } else {
            plp_estimate_config(prof, m, published, B, &e);
            print_estimate(&e, e.fits ? "  <- published" : "  <- published (does not fit)");
        }
    }
    free(best);
}

int l8_mode_plan(void) {
    const l8_state *S = l8_lab();
    if (pl_rank() != 0) return 0;
    plc_profile prof;
    if (!load_profile(S->profile, &prof, true)) return 2;
    int all_gpus = prof.gpus_per_node * prof.nodes;
    if (!strcmp(S->model, "tiny")) {
        plp_model m = {S->L, S->C, S->H, S->V, S->T, S->F, false};
        int gpus = S->gpus ? S->gpus : all_gpus, B = S->gbatch ? S->gbatch : 4 * S->b * gpus;
        plan_one(&prof, "the lab's tiny GPT", &m, gpus, B, NULL, S->top);
        return 0;
    }
    for (int i = 0; i < NROWS; i++) {
        const table1_row *r = &TABLE1[i];
        if (strcmp(S->model, "all") && strcmp(S->model, r->name)) continue;
        plp_model m = row_model(r);
        plp_config pub = row_config(r);
        int gpus = S->gpus ? S->gpus : r->gpus <= all_gpus ? r->gpus : all_gpus, B = S->gbatch ? S->gbatch : r->batch;
        char title[80];
        snprintf(title, sizeof title, "Table 1 row %s (published %.0f TFLOP/s per GPU)", r->name, r->tflops);
        bool same = gpus == r->gpus && B == r->batch && !strcmp(prof.name, "dgx-a100");
        plan_one(&prof, title, &m, gpus, B, same ? &pub : NULL, strcmp(S->model, "all") ? S->top : 3);
    }
    return 0;
}

/* ==================================================================================== */
/* bench                                                                                  */
/* ==================================================================================== */

static void bench_table1(void) {
    plc_profile prof;
    if (!load_profile("dgx-a100", &prof, false)) return;
    drv_say("# Table 1 of the Megatron-LM paper on %s: each row at its published configuration (micro-batch and virtual\n"
            "# stages from the paper's scripts, full recomputation), predicted TFLOP/s per GPU (the paper's F over the\n"
            "# predicted iteration) / published; target 0.9 - 1.1, and the planner's best never slower than the published\n",
            prof.name);
    int within = 0, never_slower = 0;
    for (int i = 0; i < NROWS; i++) {
        const table1_row *r = &TABLE1[i];
        plp_model m = row_model(r);
        plp_config c = row_config(r);
        plp_estimate e, best;
        plp_estimate_config(&prof, &m, &c, r->batch, &e);
        size_t n = plp_search(&prof, &m, r->gpus, r->batch, &best, 1);
        double ratio = e.tflops / r->tflops;
        bool ok = ratio >= 0.9 && ratio <= 1.1, faster = n > 0 && best.time <= e.time * (1 + 1e-12);
        within += ok, never_slower += faster;
        char name[64], bname[64], terms[300];
        config_name(&c, name, sizeof name);
        config_name(&best.cfg, bname, sizeof bname);
        terms_line(&e, terms, sizeof terms);
        drv_say("ratio Table 1 row %s: predicted / published  %.3f   (%.1f vs %.0f TFLOP/s per GPU; %s, m %d, %.1f GB; "
                "best %s: %.2f s vs %.2f s)\n",
                r->name, ratio, e.tflops, r->tflops, name, e.m, e.mem / 1e9, n ? bname : "none", n ? best.time : NAN, e.time);
        drv_say("#   %s: %s\n", r->name, terms);
        if (!ok)
            drv_say("#   %s misses the target: the largest term besides the GEMMs is %s (%.0f%% of the iteration)%s\n", r->name,
                    plp_term_name(plp_dominant_overhead(&e)), 100 * e.term[plp_dominant_overhead(&e)] / e.time,
                    e.fits ? "" : "; the published configuration does not fit the planner's memory model");
        if (!faster) drv_say("#   %s: the planner's best is slower than the published configuration\n", r->name);
    }
    drv_say("# Table 1: %d of %d rows within 0.9 - 1.1; the planner's best no slower than the published in %d of %d\n", within,
            NROWS, never_slower, NROWS);
}

/* The lab's step at (t, p, d) of this world, measured, and the planner's prediction of
 * that step on this-machine. */
static void bench_tiny(l8_state *S) {
    plc_profile prof;
    bool have = load_profile("this-machine", &prof, false);
    int N = pl_world();
    int steps = S->bench_steps + 1; /* the first one warms up */
    uint64_t seed = pl_info()->seed;
    l8_step_configs(S, N);
    drv_say("# the tiny GPT (T %d, b %d, C %d, H %d, F %d, V %d, L %d) stepped here at %d rank(s), median of %d steps after one; "
            "predicted on this-machine (make calibrate)\n", S->T, S->b, S->C, S->H, S->F, S->V, S->L, N, steps - 1);
    for (int i = 0; i < S->ncfgs; i++) {
        l8_tpd k = S->cfgs[i];
        l8_cfg c = l8_config(S, k.t, k.p);
        l8_layout lay;
        l8_layout_make(&lay, &c, N, pl_rank());
        size_t n = (size_t)c.micro * c.seq * c.batch;
        float *params0 = malloc(lay.count * sizeof *params0), *params = pl_malloc_floats(lay.count + 1);
        int *ids = malloc(2 * n * sizeof *ids);
        PL_CHECK(params0 && ids, "out of host memory");
        l8_initial_params(params0, &lay, &c, seed);
        pl_upload(params, params0, lay.count * sizeof *params0);
        l8_stage_run run;
        l8_stage_open(&run, &c, params);
        double t[L8_MAX_STEPS];
        int rc = TD_OK;
        for (int s = 0; s < steps && rc == TD_OK; s++) {
            /* replica dp's tokens, its targets: seeds of this mode's own */
            l8_step_ids(ids, &c, seed + 1 + (uint64_t)lay.dp, s, false);
            l8_step_ids(ids + n, &c, seed + 1 + (uint64_t)lay.dp, s, true);
            td_batch batch = {lay.first ? ids : NULL, lay.last ? ids + n : NULL};
            td_result res;
            pl_device_sync();
            double one = 1;
            pl_host_allreduce(&one, 1, PL_HOST_SUM, NULL); /* every rank starts the step together */
            double t0 = pl_now();
            rc = td_train_step(&run.st, &batch, &res);
            pl_device_sync();
            double dt = pl_now() - t0, bad = rc != TD_OK;
            pl_host_allreduce(&dt, 1, PL_HOST_MAX, NULL);
            pl_host_allreduce(&bad, 1, PL_HOST_MAX, NULL);
            if (s > 0) t[s - 1] = dt;
            if (bad > 0 && rc == TD_OK) rc = TD_ERR_TODO; /* another rank's failed: stop with it */
        }
        l8_stage_close(&run);
        if (rc != TD_OK) {
            drv_say("# tiny GPT t%dp%dd%d: td_train_step returned %d (%s): nothing measured\n", k.t, k.p, k.d, rc,
                    td_error_string(rc));
        } else {
            int m = steps - 1;
            for (int a = 1; a < m; a++)
                for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
                    double x = t[b];
                    t[b] = t[b - 1], t[b - 1] = x;
                }
            double measured = m % 2 ? t[m / 2] : (t[m / 2 - 1] + t[m / 2]) / 2;
            if (have) {
                plp_model pm = {S->L, S->C, S->H, S->V, S->T, S->F, false};
                plp_config pc = {k.t, k.p, k.d, 1, S->b, false, k.d > 1};
                plp_estimate e;
                char why[200], terms[300];
                if (plp_check(&pm, &pc, k.d * c.micro * S->b, why, sizeof why) == 0) {
                    plp_estimate_config(&prof, &pm, &pc, k.d * c.micro * S->b, &e);
                    terms_line(&e, terms, sizeof terms);
                    drv_say("ratio tiny GPT t%dp%dd%d on %s: predicted / measured  %.3f   (%.3f ms vs %.3f ms, the fastest step %.3f ms; "
                            "%s)\n", k.t, k.p, k.d, prof.name, e.time / measured, 1e3 * e.time, 1e3 * measured, 1e3 * t[0], terms);
                } else {
                    drv_say("# tiny GPT t%dp%dd%d: measured %.3f ms; the planner refuses it: %s\n", k.t, k.p, k.d, 1e3 * measured, why);
                }
            } else {
                drv_say("# tiny GPT t%dp%dd%d: measured %.3f ms (no this-machine profile: make calibrate)\n", k.t, k.p, k.d, 1e3 * measured);
            }
        }
        pl_free(params);
        free(params0), free(ids);
        l8_layout_free(&lay);
    }
}

int l8_mode_bench(void) {
    for (int i = 0; i < NROWS; i++) PL_CHECK(l8_model_known(TABLE1[i].name), "a row of Table 1 that --model does not accept");
    if (pl_rank() == 0) bench_table1();
    double one = 1;
    pl_host_allreduce(&one, 1, PL_HOST_SUM, NULL); /* rank 0's table is done before the steps start */
    bench_tiny(l8_lab());
    return 0;
}
