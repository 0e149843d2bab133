/* lab04_run.c (referee) - Lab 4's cases that run pp_execute at p = the world size:
 * their inputs and the verdicts (the serial reference: lab04_serial.c).
 *
 * Every case gets fresh inputs from its own seed (every rank's referee derives the same
 * ones): the whole model's weights, of which this rank's player receives its stage's only;
 * the tokens, which only the first stage's player receives, and the targets, only the
 * last's (no stage can compute a loss or a gradient without the activations of the others);
 * and the referee's plan of the schedule (so these cases grade the executor whatever the
 * generators do). The reference is the whole model run serially on the global batch in
 * one piece (one forward and backward of m*b sequences, not m micro-batches) by the host
 * model of models/gpt_host.h (plain loops, double accumulation: not the kernels the player
 * runs), so that what the pipeline adds (micro-batching, the 1/m scale, accumulation,
 * routing) is what is tested. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04_ref.h"

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

/* ==================================================================================== */
/* Inputs and what the step may do                                                        */
/* ==================================================================================== */

/* The token ids of a case: [m][T, b] of the counter RNG in [0, V). */
static void make_ids(int *host, int m, const gpt_config *mc, uint64_t seed, uint64_t id) {
    size_t n = (size_t)m * mc->seq * mc->batch;
    for (size_t i = 0; i < n; i++) host[i] = (int)(pl_rng_bits(seed, id, i) % (uint64_t)mc->vocab);
}

static void put_plan(drv_case *c, const char *name, const lab4_plan *pl) {
    int32_t *dst = drv_slot_new(c, name, lab4_plan_bytes(pl->stages, pl->count), DRV_IN | DRV_CONST | DRV_HOST);
    lab4_action *acts = (lab4_action *)(dst + pl->stages);
    for (int s = 0; s < pl->stages; s++) {
        dst[s] = pl->count[s];
        memcpy(acts, pl->acts[s], (size_t)pl->count[s] * sizeof *acts);
        acts += pl->count[s];
    }
}

/* The model's regions an action leaves, in order (the recomputation's rebuild is nested
 * inside B and W, and not listed). */
static int expected_regions(const run_case *st, lab4_action a, bool split, int *out) {
    int vs = a.chunk * st->p + st->s, V = st->p * st->v, n = 0, first;
    int blocks = lab4_layers(st->p, st->v, st->cfg.layers, st->s, a.chunk, &first);
    if (a.kind == L4_B && vs == V - 1) out[n++] = R_HEAD_B;
    for (int l = 0; l < blocks; l++)
        out[n++] = a.kind == L4_F ? R_BLOCK_F : a.kind == L4_W ? R_BLOCK_W : split ? R_BLOCK_B : R_BLOCK_BW;
    if (a.kind == L4_F && vs == V - 1) out[n++] = R_HEAD_F;
    return n;
}

/* Messages this stage sends in a step: per chunk, m activations forward (unless it is the
 * last virtual stage) and m gradients backward (unless the first); none at p = 1. */
static double messages(const run_case *st) {
    int V = st->p * st->v, n = 0;
    if (st->p == 1) return 0;
    for (int k = 0; k < st->v; k++) {
        int vs = k * st->p + st->s;
        n += (vs < V - 1) + (vs > 0);
    }
    return (double)n * st->m;
}

/* What this stage's step may do: its stash bound and buffers, its messages, its rebuilds,
 * its regions. */
static void expect(run_case *st) {
    bool split = st->k == L4_ZBH1;
    const lab4_action *a = st->plan.acts[st->s];
    int n = st->plan.count[st->s], regions[1100];
    double tensor = (double)st->mc.seq * st->mc.batch * st->mc.hidden * sizeof(float);
    st->bound = lab4_stash_bound(&st->mc, &st->cfg, st->s, a, n, split);
    st->slack = lab4_opts()->slack * tensor;
    st->want_msgs = messages(st);
    st->want_bytes = st->want_msgs * tensor;
    st->want_recomputes = 0;
    for (int q = 0; st->cfg.recompute && q < st->v; q++) {
        int first;
        st->want_recomputes += (double)st->m * lab4_layers(st->p, st->v, st->cfg.layers, st->s, q, &first) * (split ? 2 : 1);
    }
    st->norder = 0;
    for (int i = 0; i < n; i++) st->norder += expected_regions(st, a[i], split, regions);
    st->order_cap = st->norder + 64;
}

/* The stage's common inputs: weights, tokens (first stage), targets (last stage). */
static void stage_inputs(drv_case *c, run_case *st, uint64_t seed, int **tok, int **tgt) {
    st->nw = lab4_stage_floats(&st->mc, &st->cfg, st->s);
    st->w0 = xcalloc(st->nw, sizeof *st->w0);
    stage_weights(st, st->w0, seed);
    memcpy(drv_slot_new(c, "weights", st->nw * sizeof(float), DRV_IN | DRV_CONST | DRV_HOST), st->w0,
           st->nw * sizeof(float));
    /* what a previous step left in the gradient buffers (-lr g of another batch): the step
     * starts by zeroing them */
    float *g0 = drv_slot_new(c, "grads0", st->nw * sizeof(float), DRV_IN | DRV_CONST | DRV_HOST);
    for (size_t i = 0; i < st->nw; i++) g0[i] = pl_rng_value(seed, 50 + (uint64_t)st->s, i, PL_RNG_UNIFORM, -0.01f, 0.01f);
    size_t nids = (size_t)st->m * st->mc.seq * st->mc.batch;
    *tok = xcalloc(nids, sizeof **tok), *tgt = xcalloc(nids, sizeof **tgt);
    make_ids(*tok, st->m, &st->mc, seed, 40);
    make_ids(*tgt, st->m, &st->mc, seed, 41);
    if (st->s == 0) memcpy(drv_slot_new(c, "tokens", nids * sizeof(int), DRV_IN | DRV_CONST), *tok, nids * sizeof(int));
    if (st->s == st->p - 1)
        memcpy(drv_slot_new(c, "targets", nids * sizeof(int), DRV_IN | DRV_CONST), *tgt, nids * sizeof(int));
}

/* errors.plan's plans, from the 1F1B plan:
 *   0  stage 0 runs B(0) before F(0) (the clock sees it)
 *   1  the last stage runs B(0) twice and never B(m-1) (the clock sees it: the stage
 *      before waits for B(m-1))
 *   2  stage 0 runs B(0) twice and never B(m-1): no stage waits for stage 0's backward, so
 *      the clock runs it; only checking every stage's list shows it
 *   3  (p >= 2) every list right on its own, the whole unable to run: stage 0 runs each
 *      micro-batch's B right after its F, the last stage takes the micro-batches in reverse,
 *      the stages between all forwards first (stage 0's B(0) waits for the last stage's
 *      B(0), which comes after its F(m-1), which waits for stage 0's F(m-1), after B(0)) */
static void broken_plans(run_case *st) {
    int p = st->p, m = st->m;
    for (int t = 0; t < lab4_broken_plans(p); t++) {
        lab4_plan *pl = &st->broken[t];
        ref_plan(pl, t == 3 ? L4_GPIPE : L4_1F1B, p, m, 1);
        int at = t == 1 ? p - 1 : 0;
        lab4_action *a = (lab4_action *)pl->acts[at];
        int n = pl->count[at], fb = 0;
        while (fb < n && a[fb].kind != L4_B) fb++;
        if (t == 0) {
            lab4_action f = a[0];
            a[0] = a[fb], a[fb] = f;
        } else if (t == 1 || t == 2) {
            int last = n - 1;
            while (last > 0 && !(a[last].kind == L4_B && a[last].mb == m - 1)) last--;
            a[last] = a[fb];
        } else {
            lab4_action *z = (lab4_action *)pl->acts[0], *y = (lab4_action *)pl->acts[p - 1];
            for (int mb = 0; mb < m; mb++) {
                z[2 * mb] = (lab4_action){L4_F, mb, 0}, z[2 * mb + 1] = (lab4_action){L4_B, mb, 0};
                int r = m - 1 - mb;
                y[2 * mb] = (lab4_action){L4_F, r, 0}, y[2 * mb + 1] = (lab4_action){L4_B, r, 0};
            }
        }
    }
}

void lab4_run_setup(drv_case *c) {
    run_case *st = drv_state(c, sizeof *st);
    const lab4_flags *o = lab4_opts();
    st->k = (int)c->arg[0], st->kind = (int)c->arg[1], st->p = c->world, st->s = c->rank;
    if (st->kind == K_PLAN_ERR) st->k = L4_1F1B, st->m = st->p + 1, st->v = 1;
    else lab4_run_shape(st->k, st->p, &st->m, &st->v);
    st->cfg = (lab4_config){st->p, st->m, st->v, o->L, st->k, st->kind == K_RECOMPUTE};
    st->mc = lab4_model(o->b);
    uint64_t seed = drv_case_seed(c, 0, 0);
    int *tok, *tgt;
    stage_inputs(c, st, seed, &tok, &tgt);
    if (st->kind == K_PLAN_ERR) {
        broken_plans(st);
        for (int t = 0; t < lab4_broken_plans(st->p); t++) {
            char name[16];
            snprintf(name, sizeof name, "plan%d", t);
            put_plan(c, name, &st->broken[t]);
        }
        drv_slot_new(c, "result", (size_t)lab4_broken_plans(st->p) * sizeof(lab4_plan_result), DRV_OUT | DRV_HOST);
    } else {
        ref_plan(&st->plan, st->k, st->p, st->m, st->v);
        put_plan(c, "plan", &st->plan);
        expect(st);
        drv_slot_new(c, "params", st->nw * sizeof(float), DRV_OUT | DRV_HOST);
        drv_slot_new(c, "grads", st->nw * sizeof(float), DRV_OUT | DRV_HOST);
        drv_slot_new(c, "report", sizeof(lab4_report), DRV_OUT | DRV_HOST);
        drv_slot_new(c, "order", (size_t)st->order_cap * sizeof(int32_t), DRV_OUT | DRV_HOST);
        if (st->kind == K_STEP || st->kind == K_RECOMPUTE) serial_reference(st, tok, tgt, seed);
    }
    free(tok), free(tgt);
}

void lab4_run_teardown(drv_case *c) {
    run_case *st = c->state;
    if (!st) return;
    plan_free(&st->plan);
    for (int t = 0; t < LAB4_BROKEN_PLANS; t++) plan_free(&st->broken[t]);
    free(st->w0), free(st->ref_grad);
}

/* ==================================================================================== */
/* The checks                                                                             */
/* ==================================================================================== */

static const lab4_report *report(drv_case *c) { return drv_slot_host(c, "report"); }

/* Has any rank failed the case? Branches that lead to reductions must take this, never a
 * rank's own verdict, or the referees part ways. */
static bool failed_anywhere(drv_case *c) { return drv_max(drv_failed(c)) > 0; }

/* pp_execute's code on every rank; false (the case failed) unless PP_OK everywhere. */
static bool step_ran(drv_case *c) { return drv_all_ok(c, report(c)->rc, "pp_execute", lab4_error_string); }

/* The stage's parameter blocks in the slots' order: names and sizes (a malloc'd array). */
typedef struct {
    char name[32];
    size_t count;
} part;

static int stage_parts(const run_case *st, part **out) {
    int n = (st->s == 0) + (st->s == st->p - 1), k = 0;
    for (int q = 0; q < st->v; q++) {
        int first;
        n += lab4_layers(st->p, st->v, st->cfg.layers, st->s, q, &first);
    }
    part *v = xcalloc((size_t)n, sizeof *v);
    for (int q = 0; q < st->v; q++) {
        int first, count = lab4_layers(st->p, st->v, st->cfg.layers, st->s, q, &first);
        for (int l = first; l < first + count; l++, k++) {
            snprintf(v[k].name, sizeof v[k].name, "block %d", l);
            v[k].count = gpt_part_count(&st->mc, GPT_PART_BLOCK);
        }
    }
    if (st->s == 0) snprintf(v[k].name, sizeof v[k].name, "embedding"), v[k++].count = gpt_part_count(&st->mc, GPT_PART_EMBED);
    if (st->s == st->p - 1) snprintf(v[k].name, sizeof v[k].name, "head"), v[k++].count = gpt_part_count(&st->mc, GPT_PART_HEAD);
    *out = v;
    return n;
}

/* Loss, gradients and parameters against the serial run: the gradient buffers hold -lr g
 * after the step, the parameters p0 - lr g; the worst part is named. */
static void check_results(drv_case *c, run_case *st) {
    const float *params = drv_slot_host(c, "params"), *grads = drv_slot_host(c, "grads");
    double lr = (double)(float)lab4_opts()->lr, tol = drv_tolerance();
    double eg = 0, ep = 0, worst_e = 0;
    char worst[32] = "nothing";
    part *parts;
    int np = stage_parts(st, &parts);
    size_t at = 0;
    for (int i = 0; i < np; i++) {
        size_t count = parts[i].count;
        double *want_g = xcalloc(count, sizeof *want_g), *want_p = xcalloc(count, sizeof *want_p);
        for (size_t k = 0; k < count; k++) {
            want_g[k] = -lr * st->ref_grad[at + k];
            want_p[k] = (double)st->w0[at + k] - lr * st->ref_grad[at + k];
        }
        double g = drv_rel_err(grads + at, want_g, count), p = drv_rel_err(params + at, want_p, count), e = g > p ? g : p;
        if (!(g <= eg)) eg = g;
        if (!(p <= ep)) ep = p;
        if (!(e <= worst_e)) worst_e = e, snprintf(worst, sizeof worst, "%s", parts[i].name);
        free(want_g), free(want_p);
        at += count;
    }
    free(parts);
    double mine = report(c)->loss, loss = drv_max(st->s == st->p - 1 ? mine : -INFINITY);
    char what[160];
    drv_check_all(c, st->s == st->p - 1 || mine == 0.0,
                  "*loss is %g on stage %d, off the last virtual stage: pp_execute sets it to 0 there", mine, st->s);
    drv_num(c, "loss", loss);
    drv_check_steps(c, "loss (mean over the micro-batches) vs the serial loss of the global batch", &loss, &st->ref_loss, 1, 1,
                    tol, tol);
    snprintf(what, sizeof what, "gradients after the step (-lr g) vs the serial run's (worst: %s)", worst);
    drv_check_error(c, what, eg, tol);
    snprintf(what, sizeof what, "parameters after the SGD step vs the serial run's (worst: %s)", worst);
    drv_check_error(c, what, ep, tol);
}

void lab4_step_check(drv_case *c) {
    if (!c->ran) return;
    run_case *st = c->state;
    if (!step_ran(c)) return;
    check_results(c, st);
    drv_num(c, "micro_batches", st->m);
    drv_num(c, "chunks", st->v);
    if (!failed_anywhere(c))
        drv_note(c, "m=%d%s: loss %.6f as the serial run's, every gradient and parameter within %.0e", st->m,
                 st->v > 1 ? " v=2" : "", st->ref_loss, drv_tolerance());
}

/* The player's counters of its pp_execute: what it sent, and what its comm backend handed
 * to MPI meanwhile (its own memory: docs/grader.md). */
void lab4_traffic_check(drv_case *c) {
    if (!c->ran) return;
    run_case *st = c->state;
    if (!step_ran(c)) return;
    const pl_metrics *m = &c->m;
    double colls = drv_max((double)m->coll_total);
    double bad_peer = drv_max(report(c)->bad_peer);
    double sent = drv_sum((double)m->bytes_sent), want = drv_sum(st->want_bytes);
    drv_num(c, "bytes_per_rank", drv_max((double)m->bytes_sent));
    drv_num(c, "msgs_per_rank", drv_max((double)m->msgs_sent));
    drv_num(c, "traffic_ratio", sent > 0 ? want / sent : want > 0 ? 0 : 1);
    drv_check_counted(c, m->bytes_sent != c->wire.p2p_bytes_sent || m->msgs_sent != c->wire.p2p_msgs_sent ||
                             m->coll_total != c->wire.coll_calls, "the comm backend");
    if (colls > 0)
        drv_forbid(c, "%.0f library collective call(s): stages talk to their neighbours with pl_send/pl_recv only", colls);
    if (bad_peer >= 0) drv_fail(c, "a message to or from rank %.0f, which is not a neighbour of this stage", bad_peer);
    drv_traffic got = {.msgs = (double)m->msgs_sent, .msg_bytes = (double)m->bytes_sent};
    drv_traffic per_formula = {.msgs = st->want_msgs, .msg_bytes = st->want_bytes};
    drv_check_traffic(c, "point-to-point on this rank (m activations and m gradients per boundary between virtual stages)",
                      &got, &per_formula);
    if (!failed_anywhere(c))
        drv_note(c, "%.0f bytes in %.0f messages on the busiest rank, as the formula", drv_max((double)m->bytes_sent),
                 drv_max((double)m->msgs_sent));
}

static void check_memory(drv_case *c, const run_case *st, const char *what) {
    double stash = report(c)->stash;
    double ratio = drv_min(stash > 0 ? (st->bound + st->slack) / stash : 1);
    drv_num(c, "stash_bytes", drv_max(stash));
    drv_num(c, "stash_bound", drv_max(st->bound));
    drv_num(c, "memory_ratio", ratio);
    if (!(stash <= st->bound + st->slack))
        drv_fail(c, "%s: %.0f bytes allocated at the peak of the step, the schedule needs at most %.0f for its stash "
                    "(+ %.0f for %d exchange buffers)",
                 what, stash, st->bound, st->slack, lab4_opts()->slack);
}

void lab4_memory_check(drv_case *c) {
    if (!c->ran) return;
    run_case *st = c->state;
    if (!step_ran(c)) return;
    check_memory(c, st, "stash");
    if (!failed_anywhere(c))
        drv_note(c, "peak stash %.0f bytes on the busiest stage, bound %.0f", drv_max(report(c)->stash), drv_max(st->bound));
}

/* The executed order, from the player's summary of its trace, against this stage's list. */
static bool order_ok(drv_case *c, const run_case *st, char *why, size_t len) {
    const lab4_action *a = st->plan.acts[st->s];
    int n = st->plan.count[st->s], want[1100], got_n = report(c)->norder, at = 0;
    const int32_t *got = drv_slot_host(c, "order");
    if (got_n < 0) got_n = 0;
    int seen = got_n < st->order_cap ? got_n : st->order_cap;
    bool split = st->k == L4_ZBH1;
    for (int i = 0; i < n; i++) {
        char nm[32];
        lab4_action_name(a[i], st->v, nm, sizeof nm);
        int nw = expected_regions(st, a[i], split, want);
        for (int k = 0; k < nw; k++, at++) {
            if (at >= seen) {
                snprintf(why, len, "the step ended before action %d, %s (%s expected)", i, nm, LAB4_REGIONS[want[k]]);
                return false;
            }
            int g = got[at] >= 0 && got[at] < R_KINDS ? got[at] : R_OTHER;
            if (g != want[k]) {
                snprintf(why, len, "action %d, %s: the trace shows %s where the plan needs %s", i, nm, LAB4_REGIONS[g],
                         LAB4_REGIONS[want[k]]);
                return false;
            }
        }
    }
    if (at < got_n) {
        int g = at < seen && got[at] >= 0 && got[at] < R_KINDS ? got[at] : R_OTHER;
        snprintf(why, len, "after the plan's last action the trace shows %s", LAB4_REGIONS[g]);
        return false;
    }
    return true;
}

void lab4_order_check(drv_case *c) {
    if (!c->ran) return;
    run_case *st = c->state;
    if (!step_ran(c)) return;
    char why[240];
    if (!order_ok(c, st, why, sizeof why)) drv_fail(c, "the executed order is not the plan's: %s", why);
    const lab4_report *r = report(c);
    lab4_clock ck;
    double bubble_logical = 0, idle_logical = 0, theory = lab4_bubble(st->k, st->p, st->m, st->v);
    bool clocked = lab4_clock_run(&st->plan, st->v, &ck);
    if (clocked) {
        for (int q = 0; q < st->p; q++) {
            double span = ck.last[q] - ck.first[q];
            idle_logical += span > 0 ? (span - ck.busy[q]) / span : 0;
        }
        idle_logical /= st->p;
        bubble_logical = (double)(ck.makespan - ck.busy[0]) / ck.makespan;
    }
    double idle_measured = drv_sum(r->idle) / st->p;
    drv_num(c, "bubble_theory", theory);
    drv_num(c, "bubble_logical", bubble_logical);
    drv_num(c, "idle_logical", idle_logical);
    drv_num(c, "idle_measured", idle_measured);
    static const char *keys[2][2] = {{"pred_step_us", "pred_bubble"}, {"pred_step_us_pcie", "pred_bubble_pcie"}};
    bool pred[2];
    for (int i = 0; i < 2; i++) {
        pred[i] = drv_min(r->pred_ok[i]) > 0;
        if (pred[i]) drv_num(c, keys[i][0], r->pred_us[i]), drv_num(c, keys[i][1], r->pred_bubble[i]);
    }
    if (!failed_anywhere(c)) {
        drv_note(c, "bubble %.3f (theory) = %.3f (clock); idle between first and last action: %.3f on the clock, %.3f "
                    "measured; predicted %s %.3f, %s %.3f",
                 theory, bubble_logical, idle_logical, idle_measured, lab4_profile_name(0),
                 pred[0] ? r->pred_bubble[0] : NAN, lab4_profile_name(1), pred[1] ? r->pred_bubble[1] : NAN);
        if (clocked && ck.makespan > 0 && ck.makespan <= 60) { /* wider grids do not fit a terminal */
            drv_print("# %s at p=%d, m=%d%s: the executed schedule on the logical clock (F = 1 tick, B = %s)\n",
                      LAB4_SCHED[st->k], st->p, st->m, st->v > 1 ? ", v=2 (chunk 1 in lower case)" : "",
                      st->k == L4_ZBH1 ? "W = 1" : "2");
            lab4_print_grid(&st->plan, &ck);
        }
    }
    if (clocked) lab4_clock_free(&ck);
}

void lab4_recompute_check(drv_case *c) {
    if (!c->ran) return;
    run_case *st = c->state;
    if (!step_ran(c)) return;
    const lab4_report *r = report(c);
    check_results(c, st);
    check_memory(c, st, "with recomputation");
    double off = drv_max(fabs(r->recomputes - st->want_recomputes));
    drv_num(c, "recomputes", drv_max(r->recomputes));
    if (off > 0.5)
        drv_fail(c, "%.0f forward rebuild(s) on this rank, expected %.0f (one per block and backward pass%s: records made "
                    "with recompute = true)",
                 r->recomputes, st->want_recomputes, st->k == L4_ZBH1 ? ", B and W each" : "");
    if (failed_anywhere(c)) return;
    /* the bound without recomputation, for the comparison */
    lab4_config full = st->cfg;
    full.recompute = false;
    double full_bound = lab4_stash_bound(&st->mc, &full, st->s, st->plan.acts[st->s], st->plan.count[st->s], st->k == L4_ZBH1);
    drv_note(c, "stash %.0f bytes (bound %.0f, %.0f without recomputation), %.0f rebuilds on the busiest stage",
             drv_max(r->stash), drv_max(st->bound), drv_max(full_bound), drv_max(r->recomputes));
}

/* ==================================================================================== */
/* errors.plan                                                                            */
/* ==================================================================================== */

void lab4_plan_err_check(drv_case *c) {
    if (!c->ran) return;
    static const char *what[LAB4_BROKEN_PLANS] = {
        "stage 0 runs B(0) before F(0)", "the last stage runs B(0) twice and never B(m-1)",
        "stage 0 runs B(0) twice and never B(m-1) (no stage waits for it: check every stage's list)",
        "every list is right on its own, but stage 0 runs each B right after its F and the last stage takes the "
        "micro-batches in reverse: nothing can run"};
    const lab4_plan_result *res = drv_slot_host(c, "result");
    int n = lab4_broken_plans(c->world);
    for (int t = 0; t < n; t++) {
        /* the player stops after a plan that did not give PP_ERR_PLAN everywhere */
        double ran = drv_min(res[t].ran == 1);
        if (ran <= 0) {
            drv_fail(c, "plan where %s: not run (the player stopped before it)", what[t]);
            return;
        }
        char call[320];
        snprintf(call, sizeof call, "plan where %s: pp_execute", what[t]);
        double msgs = drv_max((double)res[t].msgs);
        if (!drv_check_code(c, res[t].rc, L4_ERR_PLAN, call, lab4_error_string)) return;
        if (msgs > 0) {
            drv_fail(c, "plan where %s: %.0f message(s) before giving up; check the plan first", what[t], msgs);
            return;
        }
    }
    drv_note(c, "%d broken plans: PP_ERR_PLAN on every rank, nothing sent", n);
}

/* Every run frees what it allocated: the player's pl_mem_in_use after the step and the
 * stage's release against before (its own accounting: docs/grader.md). */
void lab4_run_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}
