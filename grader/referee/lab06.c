/* lab06.c (referee) - Lab 6's inputs and verdicts: the initial weights and the global batch
 * of every (micro-)step from the case's seed, each rank's shard into its slots, the
 * single-rank training in float64 (lab06_ref.c), and the checks of what the players left.
 * The rubric items that rest on the player's own account (its counters, its trace, the
 * layout it read from the student's state) are marked in grader/cases/lab06.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_fashion.h"     // defines: ds_synthetic
#include "lab06_ref.h"
#include "pl_costmodel.h"   // defines: plc_profile_load

typedef struct {
    int kind, mode, steps;
    size_t total;  /* parameter floats */
    double *ref;   /* the reference parameters after the steps (equal, nosync) */
    bool looked;   /* the steps' counts were replaced by the referees' where they count them */
} lab6_case;

static struct {
    char profile[64]; /* the cost-model profile's name, for the notes */
} g_lab6;

static const int REVERSE[LAB6_NPARAMS] = {P_B3, P_W3, P_B2, P_W2, P_B1, P_W1};

void lab6_init(void) {
    const lab6_flags *o = lab6_opts();
    int n = pl_world();
    if (o->batch < n || o->batch % n) pl_usage_error("--batch %d is not a positive multiple of the world size %d", o->batch, n);
    plc_profile prof;
    char err[300];
    if (plc_profile_load(&prof, o->profile, err, sizeof err) == 0) snprintf(g_lab6.profile, sizeof g_lab6.profile, "%s", prof.name);
    else if (strcmp(o->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    drv_print("# lab06: %d rank(s), MLP 784-%d-%d-10, global batch %d, %d steps\n", n, o->hidden, o->hidden, o->batch,
              o->steps);
}

/* ==================================================================================== */
/* Inputs                                                                                */
/* ==================================================================================== */

/* Every rank's referee makes the same weights and global batch (from rank 0's seed of the
 * case) and gives its player the weights and its own rows only. */
void lab6_setup(drv_case *c) {
    lab6_case *st = drv_state(c, sizeof *st);
    const lab6_flags *o = lab6_opts();
    int h = o->hidden, batch = o->batch, local = batch / c->world;
    st->kind = (int)c->arg[1], st->mode = (int)c->arg[0], st->steps = lab6_nsteps(st->kind);
    st->total = lab6_total(h);
    uint64_t seed = drv_case_seed(c, 0, 0);
    float *w = drv_slot_new(c, "weights", st->total * sizeof(float), DRV_IN | DRV_CONST | DRV_HOST);
    l6_weights(w, h, seed);
    if (st->kind == RUN_LAYOUT || st->kind == RUN_REBUILD)
        drv_slot_new(c, "layout", sizeof(lab6_layout), DRV_OUT | DRV_HOST);
    if (st->kind == RUN_LAYOUT) return;
    int n = st->steps;
    ds_dataset data;
    ds_synthetic(&data, (size_t)n * batch, LAB6_IN, LAB6_CLASSES, seed);
    float *x = drv_slot_new(c, "x", (size_t)n * local * LAB6_IN * sizeof(float), DRV_IN | DRV_CONST | DRV_HOST);
    int *y = drv_slot_new(c, "y", (size_t)n * local * sizeof(int), DRV_IN | DRV_CONST | DRV_HOST);
    for (int s = 0; s < n; s++) {
        size_t first = (size_t)s * batch + (size_t)c->rank * local;
        memcpy(x + (size_t)s * local * LAB6_IN, data.x + first * LAB6_IN, (size_t)local * LAB6_IN * sizeof(float));
        memcpy(y + (size_t)s * local, data.y + first, (size_t)local * sizeof(int));
    }
    drv_slot_new(c, "steps", (size_t)n * sizeof(lab6_step), DRV_OUT | DRV_ZEROED | DRV_HOST);
    float *g0 = NULL;
    if (st->kind == RUN_ACCUM) {
        g0 = drv_slot_new(c, "grad0", st->total * sizeof(float), DRV_IN | DRV_CONST | DRV_HOST);
        l6_grad0(g0, h, seed);
    }
    if (st->kind != RUN_REBUILD) {
        drv_slot_new(c, "params", st->total * sizeof(float), DRV_OUT | DRV_HOST);
        st->ref = l6_train(w, g0, h, data.x, data.y, st->kind, n, batch);
    }
    ds_dataset_free(&data);
}

void lab6_teardown(drv_case *c) {
    lab6_case *st = c->state;
    if (st) free(st->ref);
}

/* The player's record of step s (its own account), its counts of collectives and messages
 * replaced, where the referees move the messages, by what they moved in the step's two
 * marked phases (unmarked: nothing). */
static const lab6_step *step_rec(drv_case *c, int s) {
    lab6_case *st = c->state;
    lab6_step *rec = drv_slot_host(c, "steps");
    for (int k = 0; !st->looked && k < st->steps && LAB6_MARK_END(k) < DRV_PHASES; k++) {
        drv_moved b, e;
        if (!drv_moved_in(LAB6_MARK_BEGIN(k), &b) || !drv_moved_in(LAB6_MARK_END(k), &e)) break;
        lab6_step *r = &rec[k];
        r->begin_colls = (int64_t)(b.m.coll_total + b.m.msgs_sent);
        r->allreduce = (int64_t)e.m.coll_calls[PL_OP_ALLREDUCE];
        r->other_colls = (int64_t)e.m.coll_total - r->allreduce;
        r->msgs = (int64_t)e.m.msgs_sent;
    }
    st->looked = true;
    return rec + s;
}

static int clampi(int64_t v, int hi) { return v < 0 ? 0 : v > hi ? hi : (int)v; }

/* ==================================================================================== */
/* Layouts                                                                               */
/* ==================================================================================== */

/* Does the student's layout (as the player read it) hold the expected one with gradient
 * views? Fails the case if not. */
static void check_layout(drv_case *c, const lab6_layout *got, const l6_expected *L, const char *when) {
    int h = lab6_opts()->hidden;
    char why[256] = "";
    for (int b = 0; b < L->nbuckets && !why[0] && got->nbuckets == L->nbuckets; b++) {
        if (got->nparams[b] != L->nparams[b]) {
            snprintf(why, sizeof why, "bucket %d holds %d parameter(s), expected %d", b, got->nparams[b], L->nparams[b]);
            break;
        }
        int64_t off = 0;
        for (int j = 0; j < got->nparams[b] && !why[0]; j++) {
            int i = L->params[b][j], gi = got->params[b][j];
            if (gi != i)
                snprintf(why, sizeof why, "bucket %d position %d is %s, expected %s", b, j,
                         gi >= 0 && gi < LAB6_NPARAMS ? LAB6_PNAMES[gi] : "?", LAB6_PNAMES[i]);
            else if (got->offsets[b][j] != off)
                snprintf(why, sizeof why, "bucket %d: %s at offset %lld, expected %lld", b, LAB6_PNAMES[i],
                         (long long)got->offsets[b][j], (long long)off);
            else if (!got->has_buf[b] || got->view[i] != off)
                snprintf(why, sizeof why, "%s's gradient is not a view of bucket %d at offset %lld", LAB6_PNAMES[i], b,
                         (long long)off);
            off += (int64_t)lab6_numel(h, i);
        }
        if (!why[0] && got->numel[b] != off)
            snprintf(why, sizeof why, "bucket %d has %lld elements, its parameters %lld", b, (long long)got->numel[b],
                     (long long)off);
    }
    if (got->nbuckets != L->nbuckets) snprintf(why, sizeof why, "%d bucket(s), expected %d", got->nbuckets, L->nbuckets);
    drv_num(c, "buckets", got->nbuckets);
    drv_num(c, "expected_buckets", L->nbuckets);
    if (why[0]) drv_fail(c, "%s%s", when, why);
}

/* buckets.<caps>: the layout after ddp_init, in reverse registration order. */
void lab6_buckets_check(drv_case *c) {
    if (!c->ran) return;
    int h = lab6_opts()->hidden;
    lab6_caps k = lab6_caps_of((int)c->arg[2], h);
    l6_expected L = l6_layout_rule(h, REVERSE, k.cap > 0 ? k.cap : 25, k.first > 0 ? k.first : 1);
    check_layout(c, drv_slot_host(c, "layout"), &L, "");
}

/* rebuild.<caps>: ranks other than 0 reported b2 before W2 in the first iteration; at the
 * second every rank must hold the layout of rank 0's observed order. */
void lab6_rebuild_check(drv_case *c) {
    if (!c->ran) return;
    int h = lab6_opts()->hidden, order[LAB6_NPARAMS];
    lab6_ready_order(lab6_bias_first(RUN_REBUILD, 0, 0), order);
    lab6_caps k = lab6_caps_of((int)c->arg[2], h);
    l6_expected L = l6_layout_rule(h, order, k.cap, k.first);
    check_layout(c, drv_slot_host(c, "layout"), &L, "after iteration 1 (expected rank 0's order W3 b3 W2 b2 W1 b1): ");
}

/* ==================================================================================== */
/* Training runs                                                                          */
/* ==================================================================================== */

/* The parameters after the steps: bit-identical on every rank, and within the tolerance
 * of single-rank training. */
static void judge_params(drv_case *c, const char *differ, const char *what) {
    lab6_case *st = c->state;
    const float *got = drv_slot_host(c, "params");
    uint64_t *all = calloc((size_t)c->world, sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather_u64(l6_hash(got, st->total), all);
    double mismatch = 0;
    for (int r = 1; r < c->world; r++) mismatch += all[r] != all[0];
    free(all);
    drv_num(c, "ranks_differ", mismatch > 0);
    if (mismatch) drv_fail(c, "%s", differ);
    else drv_check_tensor(c, what, got, st->ref, st->total, drv_tolerance());
}

void lab6_equal_check(drv_case *c) {
    if (!c->ran) return;
    char differ[80];
    snprintf(differ, sizeof differ, "parameters differ between ranks after %d steps", lab6_opts()->steps);
    judge_params(c, differ, "parameters after the steps vs single-rank training");
}

/* The steady step (the last): one all-reduce per parameter (naive) or per bucket of the
 * student's own layout; nothing else. */
void lab6_calls_check(drv_case *c) {
    if (!c->ran) return;
    lab6_case *st = c->state;
    const lab6_step *r = step_rec(c, st->steps - 1);
    double calls = drv_max((double)r->allreduce), callsmin = drv_min((double)r->allreduce);
    int want = st->mode == LAB6_NAIVE ? LAB6_NPARAMS : r->layout.nbuckets;
    bool ok = calls == want && callsmin == want; /* every rank's count, against this rank's layout */
    drv_num(c, "allreduce_calls", calls);
    drv_num(c, "expected_calls", want);
    if (!ok)
        drv_fail(c, "all-reduce calls in a steady step: %.0f, expected %d (%s)", calls == want ? callsmin : calls, want,
                 st->mode == LAB6_NAIVE ? "one per parameter" : "one per bucket");
    if (drv_min(ok) > 0) drv_check_count(c, "other collectives in a steady step", (double)r->other_colls, 0);
}

/* In bucket order: the k-th all-reduce of every step has the k-th bucket's size. */
void lab6_order_check(drv_case *c) {
    if (!c->ran) return;
    lab6_case *st = c->state;
    for (int s = 0; s < st->steps; s++) {
        const lab6_step *r = step_rec(c, s);
        int nar = clampi(r->nar, LAB6_MAX_AR), nb = clampi(r->layout.nbuckets, LAB6_MAX_PARAMS);
        for (int b = 0; b < nar && b < nb; b++)
            if (r->ar_bytes[b] != r->layout.numel[b] * (int64_t)sizeof(float)) {
                /* rank-local: the runner says which rank */
                drv_fail(c, "step %d: all-reduce %d moved %lld bytes, bucket %d holds %lld", s, b,
                         (long long)r->ar_bytes[b], b, (long long)(r->layout.numel[b] * (int64_t)sizeof(float)));
                return;
            }
    }
}

/* When may bucket b's all-reduce start? In the ddp_grad_ready call after which bucket b
 * and every earlier one are complete: out[b] = that call's index (0 .. 5) in the step's
 * order of gradients, from the student's own layout of the step; false when the layout
 * does not hold each parameter once. */
static bool launch_points(const lab6_layout *L, const int *ready, int *out) {
    int pos[LAB6_NPARAMS], seen = 0, latest = -1;
    for (int j = 0; j < LAB6_NPARAMS; j++) pos[ready[j]] = j;
    if (L->nbuckets < 1 || L->nbuckets > LAB6_MAX_PARAMS) return false;
    for (int b = 0; b < L->nbuckets; b++) {
        if (L->nparams[b] < 0 || L->nparams[b] > LAB6_MAX_PARAMS) return false;
        for (int j = 0; j < L->nparams[b]; j++) {
            int i = L->params[b][j];
            if (i < 0 || i >= LAB6_NPARAMS || (seen & (1 << i))) return false;
            seen |= 1 << i;
            if (pos[i] > latest) latest = pos[i];
        }
        out[b] = latest;
    }
    return seen == (1 << LAB6_NPARAMS) - 1;
}

/* Overlap, from the recorded order: in every step, each bucket's all-reduce starts in the
 * ddp_grad_ready call that completes it and the buckets before it (strictly in bucket
 * order, as soon as it may), so communication starts before backward ends. Reported
 * beside it: how many started inside backward, and by time, the share of all-reduce time
 * inside backward, and the cost model's replay. */
void lab6_overlap_check(drv_case *c) {
    if (!c->ran) return;
    lab6_case *st = c->state;
    const lab6_step *r = step_rec(c, st->steps - 1), *r0 = step_rec(c, 0);
    int want = r->layout.nbuckets, inside = 0;
    for (int k = 0; k < clampi(r->nar, LAB6_MAX_AR); k++) inside += r->ar_hook[k] >= 0 && r->ar_hook[k] < LAB6_NPARAMS;
    double launched = drv_min(inside), frac = drv_sum(r->frac) / c->world, frac0 = drv_sum(r0->frac) / c->world;
    drv_num(c, "launched_in_backward", launched);
    drv_num(c, "launched_in_backward_by_time", drv_min(r->in_bwd_time));
    drv_num(c, "buckets", want);
    drv_num(c, "overlap_fraction", frac);
    drv_num(c, "overlap_fraction_step0", frac0);
    if (g_lab6.profile[0] && c->world > 1 && drv_min(r->pred_ok) > 0) {
        drv_num(c, "pred_overlap", r->pred_overlap);
        drv_num(c, "pred_backward_us", r->pred_bwd_us);
        drv_note(c, "all-reduce time inside backward: %.0f%% measured; %s predicts %.0f%% hidden behind compute, backward %.1f us",
                 100 * frac, g_lab6.profile, 100 * r->pred_overlap, r->pred_bwd_us);
    }
    for (int s = 0; s < st->steps && !drv_failed(c); s++) {
        const lab6_step *q = step_rec(c, s);
        int ready[LAB6_NPARAMS], when[LAB6_MAX_PARAMS];
        lab6_ready_order(lab6_bias_first(st->kind, s, c->rank), ready);
        if (!launch_points(&q->layout, ready, when)) {
            drv_fail(c, "step %d: the buckets do not hold each parameter once", s);
            break;
        }
        int nb = q->layout.nbuckets, nar = clampi(q->nar, LAB6_MAX_AR);
        if (nar < nb) {
            drv_fail(c, "step %d: %d all-reduce(s) for %d bucket(s)", s, nar, nb);
            break;
        }
        for (int b = 0; b < nb; b++) {
            int at = q->ar_hook[b], left = LAB6_NPARAMS - 1 - when[b];
            const char *ready_at = LAB6_PNAMES[ready[when[b]]];
            if (at == when[b]) continue;
            if (at == AR_IN_END)
                drv_fail(c, "step %d: bucket %d's all-reduce started after backward, in ddp_backward_end; it could start "
                            "in ddp_grad_ready(%s), with %d gradient(s) still to compute",
                         s, b, ready_at, left);
            else if (at > when[b] && at < LAB6_NPARAMS)
                drv_fail(c, "step %d: bucket %d's all-reduce started in ddp_grad_ready(%s), %d call(s) after it could "
                            "(ddp_grad_ready(%s)): launch a bucket as soon as it and the buckets before it are full",
                         s, b, LAB6_PNAMES[ready[at]], at - when[b], ready_at);
            else if (at >= 0 && at < when[b])
                drv_fail(c, "step %d: bucket %d's all-reduce started in ddp_grad_ready(%s), before it and the buckets "
                            "before it were full (at ddp_grad_ready(%s))",
                         s, b, LAB6_PNAMES[ready[at]], ready_at);
            else
                drv_fail(c, "step %d: bucket %d's all-reduce started outside backward (in ddp_backward_begin?)", s, b);
            break;
        }
    }
    /* Issued in time is not yet beside backward: that takes the comm stream and no wait for
     * an all-reduce before backward ends (the player's trace: the op's stream, and the op of
     * the other stream each compute op follows). */
    for (int s = 0; s < st->steps && !drv_failed(c); s++) {
        const lab6_step *q = step_rec(c, s);
        if (q->ar_off_comm > 0)
            drv_fail(c, "step %d: %d bucket all-reduce(s) issued on the compute stream: the rest of backward queues behind "
                        "them; launch each on pl_stream_comm(), after an event recorded on the compute stream",
                     s, (int)q->ar_off_comm);
        else if (q->compute_waits > 0)
            drv_fail(c, "step %d: backward's compute waited for a bucket's all-reduce (a pl_stream_sync, pl_device_sync or "
                        "event wait in ddp_grad_ready), so nothing ran beside it: wait for the all-reduces in "
                        "ddp_backward_end only",
                     s);
    }
}

/* nosync: micro-steps 0 and 1 of each step accumulate locally, micro-step 2 synchronises. */
void lab6_nosync_check(drv_case *c) {
    if (!c->ran) return;
    lab6_case *st = c->state;
    double mine = 0;
    for (int s = 0; s < st->steps; s++)
        if (!lab6_step_syncs(st->kind, s)) {
            const lab6_step *r = step_rec(c, s);
            mine += (double)(r->allreduce + r->other_colls + r->msgs);
        }
    const lab6_step *last = step_rec(c, st->steps - 1);
    double colls = drv_max(mine), cs = drv_max((double)last->allreduce);
    int want = last->layout.nbuckets;
    drv_num(c, "collectives_in_no_sync", colls);
    drv_num(c, "allreduce_calls_synced", cs);
    if (!drv_check_count(c, "collectives and messages during no_sync micro-steps", mine, 0)) return;
    if (cs != want) drv_fail(c, "%.0f all-reduce(s) in the synced micro-step, expected %d (one per bucket)", cs, want);
    if (drv_max(cs != want) > 0) return;
    judge_params(c, "parameters differ between ranks after accumulation", "accumulated training vs single-rank");
}

/* accumulate.*: from the gradients a previous step left, never zeroed (the model adds to
 * them), three synced steps: what ddp_init and the rebuild find in the gradients must be
 * in the buckets. */
void lab6_accum_check(drv_case *c) {
    if (!c->ran) return;
    judge_params(c, "parameters differ between ranks after accumulating from non-zero gradients",
                 "accumulated from non-zero gradients vs single-rank");
}

/* Does the layout the player read hold L's buckets, in order? */
static bool layout_is(const lab6_layout *got, const l6_expected *L) {
    if (got->nbuckets != L->nbuckets) return false;
    for (int b = 0; b < L->nbuckets; b++) {
        if (got->nparams[b] != L->nparams[b]) return false;
        for (int j = 0; j < L->nparams[b]; j++)
            if (got->params[b][j] != L->params[b][j]) return false;
    }
    return true;
}

/* rebuild.when's two layouts: before the rebuild (reverse registration order) and after
 * it (rank 0's order in iteration 0). */
static void when_layouts(drv_case *c, l6_expected *before, l6_expected *after) {
    int h = lab6_opts()->hidden, order[LAB6_NPARAMS];
    lab6_caps k = lab6_caps_of((int)c->arg[2], h);
    lab6_ready_order(lab6_bias_first(RUN_WHEN, 0, 0), order);
    *before = l6_layout_rule(h, REVERSE, k.cap, k.first);
    *after = l6_layout_rule(h, order, k.cap, k.first);
}

/* rebuild.nosync: micro-step 1 (after iteration 0, in no_sync) keeps the initial layout and
 * communicates nothing at all, its ddp_backward_begin included; the synced micro-step 2
 * rebuilds. */
void lab6_when_nosync_check(drv_case *c) {
    if (!c->ran) return;
    l6_expected before, after;
    when_layouts(c, &before, &after);
    const lab6_step *q1 = step_rec(c, 1), *q2 = step_rec(c, 2);
    int64_t colls = q1->begin_colls + q1->allreduce + q1->other_colls + q1->msgs;
    drv_num(c, "collectives_in_no_sync", drv_max((double)colls));
    if (colls != 0)
        drv_fail(c, "%lld collective(s)/message(s) in a no_sync micro-step after iteration 0 (ddp_backward_begin "
                    "included): a rebuild waits for the next synced backward", (long long)colls);
    else if (!layout_is(&q1->layout, &before))
        drv_fail(c, "the buckets were rebuilt in a no_sync micro-step: rebuild before the second synced backward only");
    else if (!layout_is(&q2->layout, &after))
        drv_fail(c, "the synced micro-step after no_sync does not hold rank 0's order of iteration 0 (W3 b3 W2 b2 W1 b1)");
    if (drv_max(drv_failed(c)) > 0) return;
    judge_params(c, "parameters differ between ranks", "through no_sync and the rebuild vs single-rank");
}

/* rebuild.once: the initial layout in iteration 0; rank 0's order of iteration 0 from
 * iteration 1 on and never rebuilt again (no broadcast, no change), though every rank
 * reports b1 before W1 in iteration 2. */
void lab6_when_once_check(drv_case *c) {
    if (!c->ran) return;
    lab6_case *st = c->state;
    l6_expected before, after;
    when_layouts(c, &before, &after);
    const lab6_step *q0 = step_rec(c, 0);
    if (!layout_is(&q0->layout, &before) || q0->begin_colls != 0)
        drv_fail(c, "iteration 0 does not run on the initial buckets (reverse registration order): no rebuild before "
                    "the first iteration has ended");
    for (int s = 2; s < st->steps && !drv_failed(c); s++) {
        const lab6_step *q = step_rec(c, s);
        if (!layout_is(&q->layout, &after))
            drv_fail(c, "micro-step %d (iteration %d): the buckets are not rank 0's order of iteration 0 (W3 b3 W2 b2 W1 b1)%s",
                     s, s - 1, s > 2 ? ": rebuilt again?" : "");
        else if (s > 2 && q->begin_colls != 0)
            drv_fail(c, "iteration %d: %lld collective(s) in ddp_backward_begin: the buckets are rebuilt once", s - 1,
                     (long long)q->begin_colls);
    }
}

/* rebuild.late: a no_sync micro-step first is not an iteration. The first synced backward
 * (micro-step 1) is iteration 0: it still runs on the initial buckets, and the rebuild
 * before micro-step 2 follows rank 0's order in it (b3 W3 W2 b2 W1 b1), not the order of
 * the no_sync pass before it (W3 b3 W2 b2 W1 b1). */
void lab6_when_late_check(drv_case *c) {
    if (!c->ran) return;
    int h = lab6_opts()->hidden, order[LAB6_NPARAMS];
    lab6_caps k = lab6_caps_of((int)c->arg[2], h);
    lab6_ready_order(lab6_bias_first(RUN_LATE, 1, 0), order);
    l6_expected before = l6_layout_rule(h, REVERSE, k.cap, k.first), after = l6_layout_rule(h, order, k.cap, k.first);
    const lab6_step *q1 = step_rec(c, 1), *q2 = step_rec(c, 2);
    if (!layout_is(&q1->layout, &before))
        drv_fail(c, "micro-step 1, the first synced backward after a no_sync one, does not run on the initial buckets: "
                    "a no_sync pass is not an iteration, the rebuild waits until a synced one has ended");
    else if (!layout_is(&q2->layout, &after))
        drv_fail(c, "micro-step 2: the buckets are not rank 0's order of the first synced backward (b3 W3 W2 b2 W1 b1); "
                    "the order of a no_sync pass before it does not count");
    if (drv_max(drv_failed(c)) > 0) return;
    judge_params(c, "parameters differ between ranks", "through a no_sync pass, the first synced one and the rebuild vs single-rank");
}

/* Every case frees what it allocated: the player's pl_mem_in_use after ddp_free and the
 * model's buffers against before (its own accounting: docs/grader.md). */
void lab6_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}
