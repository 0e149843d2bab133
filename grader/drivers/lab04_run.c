/* lab04_run.c - Lab 4's cases that run pp_execute, at p = the world size.
 *
 * One step per schedule serves its step, traffic, memory and order cases, one more with
 * recomputation serves recompute (the first case of each computes it; arg[0] = the
 * schedule). The plan handed to pp_execute is the driver's own (lab04_sched.c), so these
 * cases grade the executor whatever the generators do. The tokens come from rank 0's
 * private seed and reach the other ranks only after the step (no stage but the first can
 * know them: the last must receive the activations to compute a loss).
 *   step.<s>       loss, every gradient this stage holds and its parameters after the
 *                  SGD step against the whole model run serially on the global batch
 *   traffic.<s>    point-to-point bytes and messages of every rank: m activations and m
 *                  gradients per boundary between virtual stages; only to neighbours; no
 *                  collective
 *   memory.<s>     peak of pl_mem_in_use during the step: the schedule's stash bound
 *                  (records of the micro-batches in flight, replayed from the plan) plus
 *                  --slack exchange buffers of [N, C]
 *   order.<s>      the executed order (the model's regions in the trace) is the plan's;
 *                  the bubble: theory, logical clock, measured from the trace, predicted
 *                  by the cost model (dgx-h100, pcie-4gpu); the grid of the schedule
 *   recompute.<s>  the same step with recomputation: results, the smaller stash, one
 *                  forward rebuild per block and backward pass (two with B and W apart)
 *   errors.plan    a plan that cannot run: PP_ERR_PLAN on every rank, nothing sent
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"

plc_profile g_prof[2];
bool g_have_prof[2];

typedef struct {
    bool done, rc_bad;
    int m, v;
    char rc_msg[200];
    double loss, loss_err, grad_err, param_err;
    char worst[64];
    double stash, bound, slack;     /* this rank, bytes */
    pl_metrics met;                 /* this rank, during pp_execute */
    pl_wire wire;
    double want_bytes, want_msgs;   /* this rank */
    int bad_peer;                   /* a message to a rank that is not a neighbour, or -1 */
    double recomputes, want_recomputes;
    bool order_bad;
    char order_why[240];
    double bubble_theory, bubble_logical, idle_logical, idle_measured, step_ms;
    double pred_us[2], pred_bubble[2];
    bool pred_ok[2];
    pp_plan plan;
    pp_clock clock;
} run_stats;
static run_stats g_runs[PP_NSCHEDULES][2];

/* ==================================================================================== */
/* What the schedule allows                                                               */
/* ==================================================================================== */

/* The stash bound of this stage, replaying its list: an F holds one record per block of
 * its chunk (and the head's on the last virtual stage) until its B frees them (W, when
 * the backward is split; the head's with B). Records hold their B gradients for W. Block
 * records and head records count at their own peaks, so that an executor may keep a
 * pool of each. */
double stash_bound(const pp_stage *st, const pp_action *a, int n, bool split) {
    const gpt_config *mc = &st->model;
    double rec = (double)gpt_acts_bytes(mc, st->cfg.recompute) + (split ? (double)gpt_acts_wstash_bytes(mc) : 0);
    int V = st->cfg.stages * st->cfg.chunks, blocks = 0, heads = 0, peak_blocks = 0, peak_heads = 0;
    for (int i = 0; i < n; i++) {
        int vs = a[i].chunk * st->cfg.stages + st->stage, b = st->chunk[a[i].chunk].count, h = vs == V - 1;
        if (a[i].kind == PP_F) blocks += b, heads += h;
        if (a[i].kind == PP_B) heads -= h, blocks -= split ? 0 : b;
        if (a[i].kind == PP_W) blocks -= b;
        if (blocks > peak_blocks) peak_blocks = blocks;
        if (heads > peak_heads) peak_heads = heads;
    }
    return peak_blocks * rec + peak_heads * (double)gpt_head_acts_bytes(mc);
}

/* Messages this stage sends in a step: per chunk, m activations forward (unless it is the
 * last virtual stage) and m gradients backward (unless the first); none at p = 1. */
static double messages(const pp_stage *st) {
    int p = st->cfg.stages, V = p * st->cfg.chunks, n = 0;
    if (p == 1) return 0;
    for (int k = 0; k < st->cfg.chunks; k++) {
        int vs = k * p + st->stage;
        n += (vs < V - 1) + (vs > 0);
    }
    return (double)n * st->cfg.micro;
}

/* ==================================================================================== */
/* One step                                                                               */
/* ==================================================================================== */

typedef struct {
    pp_stage *st;
    const pp_plan *plan;
    const pp_batch *batch;
    double loss;
    int rc;
} exec_args;

static void exec_fn(void *arg) {
    exec_args *x = arg;
    x->rc = pp_execute(x->st, x->plan, x->batch, &x->loss);
}

static void analyse(run_stats *r, const pp_stage *st, pp_schedule_kind k, bool split) {
    int s = st->stage, p = st->cfg.stages;
    r->order_bad = !trace_order(st, r->plan.acts[s], r->plan.count[s], split, r->order_why, sizeof r->order_why);
    r->idle_measured = drv_sum(trace_idle_share()) / p;
    for (int i = 0; i < 2; i++) {
        plc_prediction pp;
        r->pred_ok[i] = g_have_prof[i] && predict_step(&g_prof[i], st->comm, &pp);
        if (r->pred_ok[i]) r->pred_us[i] = pp.step_time * 1e6, r->pred_bubble[i] = 1 - pp.compute_time / pp.step_time;
    }
    write_trace(k, st->cfg.recompute);
    if (clock_run(&r->plan, st->cfg.chunks, &r->clock)) {
        double idle = 0;
        for (int q = 0; q < p; q++) {
            double span = r->clock.last[q] - r->clock.first[q];
            idle += span > 0 ? (span - r->clock.busy[q]) / span : 0;
        }
        r->idle_logical = idle / p;
        r->bubble_logical = (double)(r->clock.makespan - r->clock.busy[0]) / r->clock.makespan;
    }
    r->bubble_theory = ref_bubble(k, p, st->cfg.micro, st->cfg.chunks);
}

/* What this stage's step may do: its stash bound and buffers, its messages, its rebuilds. */
static void expect(run_stats *r, const pp_stage *st, bool split) {
    const gpt_config *mc = &st->model;
    double tensor = (double)mc->seq * mc->batch * mc->hidden * sizeof(float);
    r->bound = stash_bound(st, r->plan.acts[st->stage], r->plan.count[st->stage], split);
    r->slack = g_slack * tensor;
    r->want_msgs = messages(st);
    r->want_bytes = r->want_msgs * tensor;
    r->want_recomputes = 0;
    for (int q = 0; st->cfg.recompute && q < st->cfg.chunks; q++)
        r->want_recomputes += (double)st->cfg.micro * st->chunk[q].count * (split ? 2 : 1);
}

/* pp_execute measured as the runner measures run(): the counters, what reached the
 * backend, the rebuilds, the stash (peak minus what was allocated before), the peers;
 * x->rc and x->loss are its own. */
static void measure(run_stats *r, exec_args *x) {
    int s = x->st->stage, p = x->st->cfg.stages;
    pl_device_sync();
    pl_barrier(x->st->comm);
    pl_trace_clear();
    uint64_t rec0 = gpt_recompute_count();
    pl_wire w0, w1;
    pl_wire_get(&w0);
    size_t in_use = pl_mem_in_use();
    double t0 = pl_now();
    drv_measure(exec_fn, x, &r->met);
    r->step_ms = drv_max(1e3 * (pl_now() - t0));
    pl_wire_get(&w1);
    r->wire = (pl_wire){w1.p2p_bytes_sent - w0.p2p_bytes_sent, w1.p2p_msgs_sent - w0.p2p_msgs_sent,
                        w1.p2p_bytes_recv - w0.p2p_bytes_recv, w1.p2p_msgs_recv - w0.p2p_msgs_recv,
                        w1.coll_calls - w0.coll_calls, w1.coll_bytes - w0.coll_bytes};
    r->recomputes = (double)(gpt_recompute_count() - rec0);
    r->stash = r->met.mem_peak > in_use ? (double)(r->met.mem_peak - in_use) : 0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = 0; i < pl_trace_count(); i++)
        if ((ev[i].kind == PL_OP_SEND || ev[i].kind == PL_OP_RECV) && ev[i].peer != (s + 1) % p && ev[i].peer != (s + p - 1) % p)
            r->bad_peer = ev[i].peer;
    r->rc_bad = drv_max(x->rc != PP_OK) > 0;
    if (x->rc != PP_OK) snprintf(r->rc_msg, sizeof r->rc_msg, "pp_execute returned %d (%s)", x->rc, pp_error_string(x->rc));
    else snprintf(r->rc_msg, sizeof r->rc_msg, "pp_execute failed on another rank");
}

/* The step against the serial run, once the first stage's tokens are public. */
static void judge(run_stats *r, const pp_stage *st, double loss, int *tok, const int *tgt, uint64_t tok_seed) {
    uint64_t seeds[PP_MAX_STAGES];
    drv_allgather_u64(tok_seed, seeds);
    make_ids(tok, st->cfg.micro, &st->model, seeds[0], 40);
    serial_grads ref;
    serial_reference(&ref, &st->model, g_L, st->cfg.micro, tok, tgt, g_seed);
    r->loss = drv_max(st->has_head ? loss : -INFINITY);
    r->loss_err = isfinite(r->loss) ? fabs(r->loss - ref.loss) / fabs(ref.loss) : INFINITY;
    compare_stage(st, &ref, g_seed, &r->grad_err, &r->param_err, r->worst, sizeof r->worst);
    serial_free(&ref, g_L);
}

/* One step of schedule k (with or without recomputation) at p = the world size, its
 * results kept for every case that reads them. The first stage's tokens come from its
 * private seed; the targets from the public one. */
static void run_step(drv_case *c, pp_schedule_kind k, bool recompute) {
    run_stats *r = &g_runs[k][recompute];
    if (r->done) return;
    r->done = true;
    int p = pl_world(), m, v;
    run_shape(k, p, &m, &v);
    r->m = m, r->v = v, r->bad_peer = -1;
    pp_config cfg = {p, m, v, g_L, k, recompute};
    gpt_config mc = model_config(g_b);
    pp_stage st;
    PL_CHECK(pp_stage_build(&st, &cfg, &mc, pl_comm_world(), g_seed, (float)g_lr) == PP_OK, "the kit could not build the stage");
    ref_plan(&r->plan, k, p, m, v);
    expect(r, &st, k == PP_ZB_H1);
    size_t nids = (size_t)m * mc.seq * mc.batch;
    int *tok = calloc(nids, sizeof *tok), *tgt = calloc(nids, sizeof *tgt), *tok_d = NULL, *tgt_d = NULL;
    PL_CHECK(tok && tgt, "out of host memory");
    uint64_t tok_seed = drv_case_seed(c);
    make_ids(tgt, m, &mc, g_seed, 41);
    if (st.has_embed) make_ids(tok, m, &mc, tok_seed, 40), tok_d = pl_malloc(nids * sizeof(int)), pl_upload(tok_d, tok, nids * sizeof(int));
    if (st.has_head) tgt_d = pl_malloc(nids * sizeof(int)), pl_upload(tgt_d, tgt, nids * sizeof(int));
    pp_batch batch = {tok_d, tgt_d};
    exec_args x = {&st, &r->plan, &batch, 0, 0};
    measure(r, &x);
    if (!r->rc_bad) {
        analyse(r, &st, k, k == PP_ZB_H1);
        judge(r, &st, x.loss, tok, tgt, tok_seed);
    }
    pl_free(tok_d), pl_free(tgt_d);
    free(tok), free(tgt);
    pp_stage_free(&st);
}

void run_case(drv_case *c) { run_step(c, (pp_schedule_kind)c->arg[0], false); }
void recompute_case(drv_case *c) { run_step(c, (pp_schedule_kind)c->arg[0], true); }

/* ==================================================================================== */
/* The checks                                                                             */
/* ==================================================================================== */

static const run_stats *stats(const drv_case *c, bool recompute) { return &g_runs[c->arg[0]][recompute]; }

/* Has any rank failed the case? Branches that lead to reductions must take this, never a
 * rank's own verdict, or the ranks part ways. */
static bool failed_anywhere(drv_case *c) { return drv_max(drv_failed(c)) > 0; }

/* Loss, gradients and parameters against the serial run. */
static void check_results(drv_case *c, const run_stats *r) {
    char what[160];
    double tol = drv_tolerance();
    drv_num(c, "loss", r->loss);
    drv_check_error(c, "loss (mean over the micro-batches) vs the serial loss of the global batch", r->loss_err, tol);
    snprintf(what, sizeof what, "gradients after the step (-lr g) vs the serial run's (worst: %s)", r->worst);
    drv_check_error(c, what, r->grad_err, tol);
    snprintf(what, sizeof what, "parameters after the SGD step vs the serial run's (worst: %s)", r->worst);
    drv_check_error(c, what, r->param_err, tol);
}

void step_check(drv_case *c) {
    const run_stats *r = stats(c, false);
    if (r->rc_bad) {
        drv_fail(c, "%s", r->rc_msg);
        return;
    }
    check_results(c, r);
    drv_num(c, "micro_batches", r->m);
    drv_num(c, "chunks", r->v);
    drv_num(c, "time_us", 1e3 * r->step_ms);
    if (!failed_anywhere(c))
        drv_note(c, "m=%d%s: loss %.6f as the serial run's, every gradient and parameter within %.0e", r->m,
                 r->v > 1 ? " v=2" : "", r->loss, drv_tolerance());
}

void traffic_check(drv_case *c) {
    const run_stats *r = stats(c, false);
    if (r->rc_bad) {
        drv_fail(c, "%s", r->rc_msg);
        return;
    }
    const pl_metrics *m = &r->met;
    double colls = drv_max((double)m->coll_total);
    double tampered = drv_max((double)(m->bytes_sent != r->wire.p2p_bytes_sent || m->msgs_sent != r->wire.p2p_msgs_sent ||
                                       m->coll_total != r->wire.coll_calls));
    double bad_peer = drv_max(r->bad_peer);
    double off = drv_max(fabs((double)m->bytes_sent - r->want_bytes) + fabs((double)m->msgs_sent - r->want_msgs));
    double sent = drv_sum((double)m->bytes_sent), want = drv_sum(r->want_bytes);
    drv_num(c, "bytes_per_rank", drv_max((double)m->bytes_sent));
    drv_num(c, "msgs_per_rank", drv_max((double)m->msgs_sent));
    drv_num(c, "traffic_ratio", sent > 0 ? want / sent : want > 0 ? 0 : 1);
    if (tampered > 0) drv_forbid(c, "the counted traffic differs from what went to the comm backend (instrumentation tampered with?)");
    if (colls > 0) drv_forbid(c, "%.0f library collective call(s): stages talk to their neighbours with pl_send/pl_recv only", colls);
    if (bad_peer >= 0) drv_fail(c, "a message to or from rank %.0f, which is not a neighbour of this stage", bad_peer);
    if (off > 0.5)
        drv_fail(c, "sent %.0f bytes in %.0f messages on this rank; expected %.0f in %.0f (m = %d activations and m gradients "
                    "per boundary between virtual stages)",
                 (double)m->bytes_sent, (double)m->msgs_sent, r->want_bytes, r->want_msgs, r->m);
    if (!failed_anywhere(c))
        drv_note(c, "%.0f bytes in %.0f messages on the busiest rank, as the formula", drv_max((double)m->bytes_sent),
                 drv_max((double)m->msgs_sent));
}

static void check_memory(drv_case *c, const run_stats *r, const char *what) {
    double ratio = drv_min(r->stash > 0 ? (r->bound + r->slack) / r->stash : 1);
    drv_num(c, "stash_bytes", drv_max(r->stash));
    drv_num(c, "stash_bound", drv_max(r->bound));
    drv_num(c, "memory_ratio", ratio);
    if (r->stash > r->bound + r->slack)
        drv_fail(c, "%s: %.0f bytes allocated at the peak of the step, the schedule needs at most %.0f for its stash "
                    "(+ %.0f for %d exchange buffers)",
                 what, r->stash, r->bound, r->slack, g_slack);
}

void memory_check(drv_case *c) {
    const run_stats *r = stats(c, false);
    if (r->rc_bad) {
        drv_fail(c, "%s", r->rc_msg);
        return;
    }
    check_memory(c, r, "stash");
    if (!failed_anywhere(c))
        drv_note(c, "peak stash %.0f bytes on the busiest stage, bound %.0f", drv_max(r->stash), drv_max(r->bound));
}

void order_check(drv_case *c) {
    run_stats *r = &g_runs[c->arg[0]][0];
    if (r->rc_bad) {
        drv_fail(c, "%s", r->rc_msg);
        return;
    }
    if (r->order_bad) drv_fail(c, "the executed order is not the plan's: %s", r->order_why);
    drv_num(c, "bubble_theory", r->bubble_theory);
    drv_num(c, "bubble_logical", r->bubble_logical);
    drv_num(c, "idle_logical", r->idle_logical);
    drv_num(c, "idle_measured", r->idle_measured);
    static const char *keys[2][2] = {{"pred_step_us", "pred_bubble"}, {"pred_step_us_pcie", "pred_bubble_pcie"}};
    for (int i = 0; i < 2; i++)
        if (drv_min(r->pred_ok[i]) > 0) drv_num(c, keys[i][0], r->pred_us[i]), drv_num(c, keys[i][1], r->pred_bubble[i]);
    if (failed_anywhere(c)) return;
    drv_note(c, "bubble %.3f (theory) = %.3f (clock); idle between first and last action: %.3f on the clock, %.3f measured; "
                "predicted %s %.3f, %s %.3f",
             r->bubble_theory, r->bubble_logical, r->idle_logical, r->idle_measured, g_prof[0].name,
             r->pred_ok[0] ? r->pred_bubble[0] : NAN, g_prof[1].name, r->pred_ok[1] ? r->pred_bubble[1] : NAN);
    if (r->clock.makespan > 0 && r->clock.makespan <= 60) { /* wider grids do not fit a terminal */
        drv_print("# %s at p=%d, m=%d%s: the executed schedule on the logical clock (F = 1 tick, B = %s)\n",
                  SCHED_NAMES[c->arg[0]], r->plan.stages, r->m, r->v > 1 ? ", v=2 (chunk 1 in lower case)" : "",
                  c->arg[0] == PP_ZB_H1 ? "W = 1" : "2");
        print_grid(&r->plan, &r->clock);
    }
}

void recompute_check(drv_case *c) {
    const run_stats *r = stats(c, true), *full = stats(c, false);
    if (r->rc_bad) {
        drv_fail(c, "%s", r->rc_msg);
        return;
    }
    check_results(c, r);
    check_memory(c, r, "with recomputation");
    double off = drv_max(fabs(r->recomputes - r->want_recomputes));
    drv_num(c, "recomputes", drv_max(r->recomputes));
    if (off > 0.5)
        drv_fail(c, "%.0f forward rebuild(s) on this rank, expected %.0f (one per block and backward pass%s: records made "
                    "with recompute = true)",
                 r->recomputes, r->want_recomputes, c->arg[0] == PP_ZB_H1 ? ", B and W each" : "");
    if (failed_anywhere(c)) return;
    double drop = full->done && !full->rc_bad ? drv_max(full->stash) - drv_max(r->stash) : NAN;
    drv_num(c, "memory_drop", drop);
    drv_note(c, "stash %.0f bytes (bound %.0f, %.0f without recomputation), %.0f rebuilds on the busiest stage",
             drv_max(r->stash), drv_max(r->bound), full->done ? drv_max(full->bound) : NAN, drv_max(r->recomputes));
}

/* ==================================================================================== */
/* errors.plan                                                                            */
/* ==================================================================================== */

void plan_error_case(drv_case *c) {
    int p = pl_world(), m = p + 1;
    pp_config cfg = {p, m, 1, g_L, PP_1F1B, false};
    gpt_config mc = model_config(g_b);
    pp_stage st;
    PL_CHECK(pp_stage_build(&st, &cfg, &mc, pl_comm_world(), g_seed, (float)g_lr) == PP_OK, "the kit could not build the stage");
    size_t nids = (size_t)m * mc.seq * mc.batch;
    int *ids = calloc(nids, sizeof *ids), *ids_d = pl_malloc(nids * sizeof(int));
    PL_CHECK(ids != NULL, "out of host memory");
    make_ids(ids, m, &mc, g_seed, 42);
    pl_upload(ids_d, ids, nids * sizeof(int));
    pp_batch batch = {st.has_embed ? ids_d : NULL, st.has_head ? ids_d : NULL};
    const char *what[2] = {"stage 0 runs B(0) before F(0)", "the last stage runs B(0) twice and never B(m-1)"};
    bool failed = false;
    for (int t = 0; t < 2 && !failed; t++) {
        pp_plan pl;
        ref_plan(&pl, PP_1F1B, p, m, 1);
        pp_action *a = (pp_action *)pl.acts[t == 0 ? 0 : p - 1];
        int n = pl.count[t == 0 ? 0 : p - 1], fb = 0;
        while (fb < n && a[fb].kind != PP_B) fb++;
        if (t == 0) {
            pp_action f = a[0];
            a[0] = a[fb], a[fb] = f;
        } else {
            a[n - 1] = a[fb];
        }
        exec_args x = {&st, &pl, &batch, 0, 0};
        pl_metrics met;
        drv_measure(exec_fn, &x, &met);
        double bad = drv_max(x.rc != PP_ERR_PLAN), msgs = drv_max((double)(met.msgs_sent + met.msgs_recv));
        if (bad > 0 && x.rc != PP_ERR_PLAN)
            drv_fail(c, "plan where %s: pp_execute returned %d (%s), expected PP_ERR_PLAN", what[t], x.rc, pp_error_string(x.rc));
        else if (bad > 0)
            drv_fail(c, "plan where %s: another rank did not return PP_ERR_PLAN", what[t]);
        else if (msgs > 0)
            drv_fail(c, "plan where %s: %.0f message(s) before giving up; check the plan first", what[t], msgs);
        failed = bad > 0 || msgs > 0;
        plan_free(&pl);
    }
    if (!failed) drv_note(c, "two broken plans: PP_ERR_PLAN on every rank, nothing sent");
    pl_free(ids_d), free(ids);
    pp_stage_free(&st);
}
