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
    if (st->kind != RUN_REBUILD) {
        drv_slot_new(c, "params", st->total * sizeof(float), DRV_OUT | DRV_HOST);
        st->ref = l6_train(w, h, data.x, data.y, st->kind, n, batch);
    }
    ds_dataset_free(&data);
}

void lab6_teardown(drv_case *c) {
    lab6_case *st = c->state;
    if (st) free(st->ref);
}

/* The player's record of step s (its own account). */
static const lab6_step *step_rec(drv_case *c, int s) { return (const lab6_step *)drv_slot_host(c, "steps") + s; }

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
    double rel = drv_max(l6_rel_err(got, st->ref, st->total));
    drv_num(c, "rel_err", rel);
    if (mismatch) {
        drv_num(c, "ranks_differ", 1);
        drv_fail(c, "%s", differ);
        return;
    }
    drv_num(c, "ranks_differ", 0);
    drv_check_error(c, what, rel, drv_tolerance());
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
    double other = drv_max((double)r->other_colls);
    int want = st->mode == LAB6_NAIVE ? LAB6_NPARAMS : r->layout.nbuckets;
    drv_num(c, "allreduce_calls", calls);
    drv_num(c, "expected_calls", want);
    if (calls != want || callsmin != want)
        drv_fail(c, "%.0f all-reduce call(s) in a steady step, expected %d (%s)", calls, want,
                 st->mode == LAB6_NAIVE ? "one per parameter" : "one per bucket");
    else if (other > 0)
        drv_fail(c, "%.0f other collective(s) in a steady step, expected none", other);
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

/* Every bucket's all-reduce of the steady step starts while backward is still running. */
void lab6_overlap_check(drv_case *c) {
    if (!c->ran) return;
    lab6_case *st = c->state;
    const lab6_step *r = step_rec(c, st->steps - 1), *r0 = step_rec(c, 0);
    double launched = drv_min(r->in_bwd_time), frac = drv_sum(r->frac) / c->world, frac0 = drv_sum(r0->frac) / c->world;
    int want = r->layout.nbuckets;
    drv_num(c, "launched_in_backward", launched);
    drv_num(c, "buckets", want);
    drv_num(c, "overlap_fraction", frac);
    drv_num(c, "overlap_fraction_step0", frac0);
    if (g_lab6.profile[0] && c->world > 1 && drv_min(r->pred_ok) > 0) {
        drv_num(c, "pred_overlap", r->pred_overlap);
        drv_num(c, "pred_backward_us", r->pred_bwd_us);
        drv_note(c, "all-reduce time inside backward: %.0f%% measured; %s predicts %.0f%% hidden behind compute, backward %.1f us",
                 100 * frac, g_lab6.profile, 100 * r->pred_overlap, r->pred_bwd_us);
    }
    if (launched < want)
        drv_fail(c, "only %.0f of %d bucket all-reduces started while backward was running", launched, want);
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
    if (colls > 0) {
        drv_fail(c, "%.0f collective(s)/message(s) during no_sync micro-steps, expected 0", colls);
        return;
    }
    if (cs != want) drv_fail(c, "%.0f all-reduce(s) in the synced micro-step, expected %d (one per bucket)", cs, want);
    if (drv_max(cs != want) > 0) return;
    judge_params(c, "parameters differ between ranks after accumulation", "accumulated training vs single-rank");
}
