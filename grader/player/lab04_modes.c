/* lab04_modes.c (player) - Lab 4's modes, the student's own schedules and executor run
 * alone (no referee):
 *   --run sweep  (make lab-4 RUN=sweep)  m = 1, 2, 4 ... for every schedule at p ranks:
 *                the bubble (theory, logical clock, measured idle, cost-model prediction)
 *                and the peak stash (measured, bound); scripts/plot-sweep-4.sh plots them
 *   --run train  (make lab-4 RUN=train)  a tiny GPT learns a text byte by byte over the
 *                pipeline; rank 0 trains the same model alone on the same micro-batches,
 *                and the two loss curves must agree; scripts/plot-train-4.sh plots them
 *   --run bench  (make bench LAB=4)      step time per schedule against one rank doing
 *                the same work, the bubble beside theory, the dgx-h100 prediction
 * The modes use a larger model than grading (mode_model), so that compute, not message
 * latency, fills a step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04_play.h"

/* Host tokens or targets [m][T, b] of the counter RNG (ids in [0, V)). */
static void make_ids(int *host, int m, const gpt_config *mc, uint64_t seed, uint64_t id) {
    size_t n = (size_t)m * mc->seq * mc->batch;
    for (size_t i = 0; i < n; i++) host[i] = (int)(pl_rng_bits(seed, id, i) % (uint64_t)mc->vocab);
}

/* The modes' GPT: bigger than the graded one. train learns bytes (V = 256). */
static gpt_config mode_model(int vocab) {
    return (gpt_config){.seq = 32, .batch = 4, .hidden = 64, .heads = 4, .ffn = 256, .vocab = vocab, .max_pos = 32};
}
enum { MODE_LAYERS = 8 };

/* The schedules a mode runs: --schedule NAME, or every one ("all", the default). */
static int schedules(pp_schedule_kind *out, const char *dflt) {
    const char *want = lab4_opts()->schedule ? lab4_opts()->schedule : dflt;
    int n = 0;
    for (int k = 0; k < PP_NSCHEDULES; k++)
        if (!strcmp(want, "all") || !strcmp(want, LAB4_SCHED[k])) out[n++] = (pp_schedule_kind)k;
    if (!n) pl_usage_error("--schedule '%s': one of gpipe, 1f1b, interleaved, zbh1, all", want);
    return n;
}

/* The student's lists for every stage, or the run stops with what went wrong. */
static void plan_or_stop(pp_schedule_kind k, int p, int m, int v, pp_plan *pl) {
    char why[300];
    if (!lab4_student_plan(k, p, m, v, pl, why, sizeof why)) pl_usage_error("%s: finish the schedules first", why);
}

/* ==================================================================================== */
/* One measured step                                                                      */
/* ==================================================================================== */

typedef struct {
    double loss, ms, stash, idle, pred_us, pred_bubble;
    int rc;
} step_result;

/* One pp_execute: its time, the stash (peak - in use before), the mean idle share between
 * each rank's first and last action (the model's regions in the trace), the prediction. */
static step_result measured_step(pp_stage *st, const pp_plan *pl, const pp_batch *b) {
    step_result r = {0};
    pl_device_sync();
    pl_barrier(st->comm);
    pl_trace_clear();
    pl_metrics_reset();
    size_t in_use = pl_mem_in_use();
    double t0 = pl_now();
    r.rc = pp_execute(st, pl, b, &r.loss);
    pl_device_sync();
    r.ms = drv_max(1e3 * (pl_now() - t0));
    int worst = (int)drv_min(r.rc); /* the codes are negative */
    if (worst != PP_OK) pl_usage_error("pp_execute returned %d (%s)", worst, pp_error_string(worst));
    r.loss = drv_max(st->has_head ? r.loss : -INFINITY);
    r.stash = drv_max((double)(pl_mem_peak() - in_use));
    r.idle = drv_sum(lab4_trace_idle()) / st->cfg.stages;
    plc_prediction pp;
    if (lab4_profile(0) && lab4_predict_step(lab4_profile(0), st->comm, &pp))
        r.pred_us = pp.step_time * 1e6, r.pred_bubble = 1 - pp.compute_time / pp.step_time;
    else r.pred_us = r.pred_bubble = NAN;
    return r;
}

/* Tokens for a step of the sweep and bench: from the counter RNG. */
static int *upload_ids(int m, const gpt_config *mc, uint64_t id) {
    size_t n = (size_t)m * mc->seq * mc->batch;
    int *h = malloc(n * sizeof *h), *d = pl_malloc(n * sizeof(int));
    PL_CHECK(h != NULL, "out of host memory");
    make_ids(h, m, mc, pl_info()->seed, id);
    pl_upload(d, h, n * sizeof(int));
    free(h);
    return d;
}

static int chunks_for(pp_schedule_kind k, int p, int L) { return k != PP_INTERLEAVED ? 1 : 2 * p <= L ? 2 : 1; }

/* ==================================================================================== */
/* sweep                                                                                  */
/* ==================================================================================== */

int lab4_mode_sweep(void) {
    pp_schedule_kind ks[PP_NSCHEDULES];
    int nk = schedules(ks, "all"), p = pl_world(), mmax = lab4_opts()->train_micro > 0 ? lab4_opts()->train_micro : 32;
    gpt_config mc = mode_model(64);
    if (MODE_LAYERS < p) pl_usage_error("the sweep's model has %d blocks: run it on at most %d ranks, not %d", MODE_LAYERS, MODE_LAYERS, p);
    drv_say("# sweep at p=%d: GPT T=%d b=%d C=%d F=%d, %d blocks; the bubble as the share of the step a stage is idle\n", p,
            mc.seq, mc.batch, mc.hidden, mc.ffn, MODE_LAYERS);
    for (int i = 0; i < nk; i++) {
        pp_schedule_kind k = ks[i];
        int v = chunks_for(k, p, MODE_LAYERS);
        for (int m = 1; m <= mmax; m *= 2) {
            if (k == PP_INTERLEAVED && m % p) continue;
            pp_config cfg = {p, m, v, MODE_LAYERS, k, false};
            pp_stage st;
            PL_CHECK(lab4_stage_build(&st, &cfg, &mc, pl_comm_world(), NULL, NULL, pl_info()->seed, 0.0f) == PP_OK, "the kit could not build the stage");
            int *tok = upload_ids(m, &mc, 40), *tgt = upload_ids(m, &mc, 41);
            pp_batch b = {st.has_embed ? tok : NULL, st.has_head ? tgt : NULL};
            pp_plan pl;
            plan_or_stop(k, p, m, v, &pl);
            measured_step(&st, &pl, &b); /* warm-up: first-touch allocations */
            step_result r = measured_step(&st, &pl, &b);
            lab4_clock ck;
            lab4_plan view = lab4_plan_view(&pl);
            double logical = NAN;
            if (lab4_clock_run(&view, v, &ck)) logical = (double)(ck.makespan - ck.busy[0]) / ck.makespan;
            lab4_clock_free(&ck);
            double bound = drv_max(lab4_stash_bound(&mc, (const lab4_config *)&cfg, st.stage, view.acts[st.stage],
                                                    view.count[st.stage], k == PP_ZB_H1));
            drv_say("sweep sched=%s p=%d m=%d v=%d bubble_theory=%.4f bubble_clock=%.4f idle_measured=%.4f pred_bubble=%.4f "
                    "pred_step_us=%.1f stash_bytes=%.0f stash_bound=%.0f step_ms=%.3f\n",
                    LAB4_SCHED[k], p, m, v, lab4_bubble(k, p, m, v), logical, r.idle, r.pred_bubble, r.pred_us, r.stash, bound,
                    r.ms);
            lab4_plan_release(&pl);
            pl_free(tok), pl_free(tgt);
            lab4_stage_free(&st);
        }
    }
    return 0;
}

/* ==================================================================================== */
/* The serial model (train's and bench's single rank)                                     */
/* ==================================================================================== */

/* The whole model on one rank, trained exactly as the pipeline trains it: m micro-batches,
 * each forward then backward, gradients accumulated in micro-batch order with the loss
 * scaled by 1/m, then SGD. The pipeline's stages accumulate in that order too, so on one
 * device the two runs agree to the bit. */
typedef struct {
    gpt_config mc;
    int L, m;
    gpt_embed_params e, de;
    gpt_head_params h, dh;
    gpt_block_params *b, *db;
    gpt_acts **a;
    gpt_head_acts *ha;
    gpt_workspace *ws;
    float *x, *dx, *dy;
} serial_model;

static void serial_init(serial_model *s, const gpt_config *mc, int L, int m) {
    memset(s, 0, sizeof *s);
    s->mc = *mc, s->L = L, s->m = m;
    gpt_embed_params_alloc(&s->e, mc), gpt_embed_init(&s->e, mc, pl_info()->seed);
    gpt_embed_params_alloc(&s->de, mc);
    gpt_head_params_alloc(&s->h, mc), gpt_head_init(&s->h, mc, pl_info()->seed);
    gpt_head_params_alloc(&s->dh, mc);
    s->b = calloc((size_t)L, sizeof *s->b), s->db = calloc((size_t)L, sizeof *s->db), s->a = calloc((size_t)L, sizeof *s->a);
    PL_CHECK(s->b && s->db && s->a, "out of host memory");
    for (int l = 0; l < L; l++) {
        gpt_block_params_alloc(&s->b[l], mc), gpt_block_init(&s->b[l], mc, l, pl_info()->seed);
        gpt_block_params_alloc(&s->db[l], mc);
        s->a[l] = gpt_acts_alloc(mc, false);
    }
    s->ha = gpt_head_acts_alloc(mc);
    s->ws = gpt_workspace_alloc(mc, GPT_WS_HEAD);
    size_t NC = (size_t)mc->seq * mc->batch * mc->hidden;
    s->x = pl_malloc_floats(NC), s->dx = pl_malloc_floats(NC), s->dy = pl_malloc_floats(NC);
}

static void serial_done(serial_model *s) {
    for (int l = 0; l < s->L; l++) gpt_block_params_free(&s->b[l]), gpt_block_params_free(&s->db[l]), gpt_acts_free(s->a[l]);
    free(s->b), free(s->db), free(s->a);
    gpt_embed_params_free(&s->e), gpt_embed_params_free(&s->de);
    gpt_head_params_free(&s->h), gpt_head_params_free(&s->dh);
    gpt_head_acts_free(s->ha);
    gpt_workspace_free(s->ws);
    pl_free(s->x), pl_free(s->dx), pl_free(s->dy);
}

/* One step on tokens/targets [m][T, b] (device); returns the mean loss. */
static double serial_step(serial_model *s, const int *tok, const int *tgt, float lr) {
    size_t Tb = (size_t)s->mc.seq * s->mc.batch;
    double loss = 0;
    pl_fill(s->de.base, 0.0f, s->de.count, NULL);
    pl_fill(s->dh.base, 0.0f, s->dh.count, NULL);
    for (int l = 0; l < s->L; l++) pl_fill(s->db[l].base, 0.0f, s->db[l].count, NULL);
    for (int k = 0; k < s->m; k++) {
        gpt_embed_forward(&s->mc, &s->e, s->x, tok + k * Tb, NULL);
        for (int l = 0; l < s->L; l++) gpt_block_forward(&s->b[l], s->a[l], s->x, s->x, s->ws, NULL);
        loss += gpt_head_forward(&s->h, s->ha, s->x, tgt + k * Tb, s->ws, NULL);
        gpt_head_backward(&s->h, &s->dh, s->ha, s->dy, 1.0f / (float)s->m, s->ws, NULL);
        for (int l = s->L - 1; l >= 0; l--) {
            gpt_block_backward(&s->b[l], &s->db[l], s->a[l], s->dx, s->dy, s->ws, NULL);
            float *t = s->dx;
            s->dx = s->dy, s->dy = t;
        }
        gpt_embed_backward(&s->mc, &s->de, s->dy, tok + k * Tb, NULL);
    }
    for (int l = 0; l < s->L; l++) gpt_sgd_step(s->b[l].base, s->db[l].base, s->b[l].count, lr, NULL);
    gpt_sgd_step(s->e.base, s->de.base, s->e.count, lr, NULL);
    gpt_sgd_step(s->h.base, s->dh.base, s->h.count, lr, NULL);
    return loss / s->m;
}

/* ==================================================================================== */
/* train                                                                                  */
/* ==================================================================================== */

/* Step `step`'s windows of T+1 bytes: micro-batch k, sequence j starts at a position from
 * the counter RNG; tokens are bytes t, targets bytes t+1 ([m][T, b], sequence-major). */
static void text_batch(const unsigned char *text, size_t n, int step, int m, const gpt_config *mc, int *tok, int *tgt) {
    int T = mc->seq, b = mc->batch;
    for (int k = 0; k < m; k++)
        for (int j = 0; j < b; j++) {
            size_t at = (size_t)(pl_rng_bits(pl_info()->seed, 77, (uint64_t)step * 4096 + (uint64_t)(k * b + j)) % (n - (size_t)T - 1));
            for (int t = 0; t < T; t++) {
                tok[((size_t)k * T + t) * b + j] = text[at + (size_t)t];
                tgt[((size_t)k * T + t) * b + j] = text[at + (size_t)t + 1];
            }
        }
}

int lab4_mode_train(void) {
    pp_schedule_kind ks[PP_NSCHEDULES];
    schedules(ks, "1f1b");
    pp_schedule_kind k = ks[0];
    int p = pl_world(), m = lab4_opts()->train_micro > 0 ? lab4_opts()->train_micro : 4, L = 4;
    if (k == PP_INTERLEAVED && m % p) m = p * ((m + p - 1) / p);
    int v = k == PP_INTERLEAVED && 2 * p <= L ? 2 : 1;
    gpt_config mc = mode_model(256);
    pp_config cfg = {p, m, v, L, k, false};
    int rc = pp_config_check(&cfg);
    if (rc != PP_OK) pl_usage_error("pp_config_check: %s (p %d, m %d, v %d, %d blocks)", pp_error_string(rc), p, m, v, L);
    float lr = (float)lab4_opts()->train_lr;
    size_t n;
    unsigned char *text = drv_read_text(lab4_opts()->text, "labs/04-pipeline/README.md", &n);
    pp_stage st;
    PL_CHECK(lab4_stage_build(&st, &cfg, &mc, pl_comm_world(), NULL, NULL, pl_info()->seed, lr) == PP_OK, "the kit could not build the stage");
    serial_model ser;
    if (pl_rank() == 0) serial_init(&ser, &mc, L, m);
    pp_plan pl;
    plan_or_stop(k, p, m, v, &pl);
    size_t nids = (size_t)m * mc.seq * mc.batch;
    int *tok = malloc(nids * sizeof *tok), *tgt = malloc(nids * sizeof *tgt);
    int *tok_d = pl_malloc(nids * sizeof(int)), *tgt_d = pl_malloc(nids * sizeof(int));
    PL_CHECK(tok && tgt, "out of host memory");
    pp_batch b = {st.has_embed ? tok_d : NULL, st.has_head ? tgt_d : NULL};
    drv_say("# train: %s at p=%d, m=%d micro-batches of %d x %d bytes, %d blocks C=%d, SGD lr %.2f, %d steps\n",
            LAB4_SCHED[k], p, m, mc.batch, mc.seq, L, mc.hidden, lr, lab4_opts()->steps);
    double worst = 0;
    for (int step = 0; step < lab4_opts()->steps; step++) {
        text_batch(text, n, step, m, &mc, tok, tgt);
        pl_upload(tok_d, tok, nids * sizeof(int));
        pl_upload(tgt_d, tgt, nids * sizeof(int));
        double loss = 0;
        rc = (int)drv_min(pp_execute(&st, &pl, &b, &loss)); /* the codes are negative */
        if (rc != PP_OK) pl_usage_error("pp_execute returned %d (%s) at step %d", rc, pp_error_string(rc), step);
        loss = drv_max(st.has_head ? loss : -INFINITY);
        double single = pl_rank() == 0 ? serial_step(&ser, tok_d, tgt_d, lr) : -INFINITY;
        single = drv_max(single);
        double diff = fabs(loss - single) / fabs(single);
        if (!(diff <= worst)) worst = diff;
        drv_say("train step %d np %d loss %.6f single %.6f rel_diff %.2e\n", step, p, loss, single, diff);
        pl_trace_clear(); /* a long run: keep the trace from growing */
    }
    bool ok = worst <= pl_tolerance();
    drv_say("# train: worst relative difference of the two loss curves %.2e (tolerance %.0e): %s\n", worst,
            pl_tolerance(), ok ? "equal" : "DIFFERENT");
    lab4_plan_release(&pl);
    if (pl_rank() == 0) serial_done(&ser);
    pl_free(tok_d), pl_free(tgt_d);
    free(tok), free(tgt), free(text);
    lab4_stage_free(&st);
    return ok ? 0 : 1;
}

/* ==================================================================================== */
/* bench                                                                                  */
/* ==================================================================================== */

int lab4_mode_bench(void) {
    pp_schedule_kind ks[PP_NSCHEDULES];
    int nk = schedules(ks, "all"), p = pl_world(), m = 4 * p, iters = drv_opts()->iters > 0 ? drv_opts()->iters : 3;
    gpt_config mc = mode_model(64);
    if (MODE_LAYERS < p) pl_usage_error("the bench's model has %d blocks: run it on at most %d ranks, not %d", MODE_LAYERS, MODE_LAYERS, p);
    int *tok = upload_ids(m, &mc, 40), *tgt = upload_ids(m, &mc, 41);
    /* one rank, the same work: the whole model, the same m micro-batches; its last step
     * replayed alone on the profile */
    double single = 0, single_pred = 0;
    if (pl_rank() == 0) {
        serial_model ser;
        serial_init(&ser, &mc, MODE_LAYERS, m);
        serial_step(&ser, tok, tgt, 0.0f);
        double t0 = pl_now();
        for (int i = 0; i < iters; i++) {
            pl_trace_clear();
            serial_step(&ser, tok, tgt, 0.0f);
        }
        single = 1e3 * (pl_now() - t0) / iters;
        plc_op *ops = malloc((pl_trace_count() + 1) * sizeof *ops);
        PL_CHECK(ops != NULL, "out of host memory");
        plc_prediction pp;
        char err[200];
        size_t n = plc_ops_from_trace(0, 0, ops, pl_trace_count());
        if (lab4_profile(0) && plc_replay(lab4_profile(0), ops, n, 1, &pp, err, sizeof err) == 0) single_pred = pp.step_time * 1e6;
        free(ops);
        serial_done(&ser);
    }
    single = drv_max(single);
    single_pred = drv_max(single_pred);
    for (int i = 0; i < nk; i++) {
        pp_schedule_kind k = ks[i];
        int v = chunks_for(k, p, MODE_LAYERS);
        pp_config cfg = {p, m, v, MODE_LAYERS, k, false};
        pp_stage st;
        PL_CHECK(lab4_stage_build(&st, &cfg, &mc, pl_comm_world(), NULL, NULL, pl_info()->seed, 0.0f) == PP_OK, "the kit could not build the stage");
        pp_batch b = {st.has_embed ? tok : NULL, st.has_head ? tgt : NULL};
        pp_plan pl;
        plan_or_stop(k, p, m, v, &pl);
        measured_step(&st, &pl, &b);
        double ms = 0, idle = 0;
        step_result r = {0};
        for (int it = 0; it < iters; it++) r = measured_step(&st, &pl, &b), ms += r.ms, idle += r.idle;
        drv_say("bench04 np %d sched %-11s m %d v %d step_ms %8.3f single_rank_ms %8.3f speedup %.2f bubble_theory %.3f "
                "idle_measured %.3f pred_step_us %.1f pred_single_us %.1f pred_speedup %.2f pred_bubble %.3f profile %s\n",
                p, LAB4_SCHED[k], m, v, ms / iters, single, single / (ms / iters), lab4_bubble(k, p, m, v), idle / iters,
                r.pred_us, single_pred, single_pred / r.pred_us, r.pred_bubble, lab4_profile(0) ? lab4_profile(0)->name : "-");
        lab4_plan_release(&pl);
        lab4_stage_free(&st);
    }
    pl_free(tok), pl_free(tgt);
    return 0;
}
