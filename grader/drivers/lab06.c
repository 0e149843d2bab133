/* lab06.c - the driver of Lab 6 (data parallelism with gradient buckets).
 *
 * The model and the data are in lab06_model.c, the bucket cases in lab06_buckets.c, the
 * bench and training modes in lab06_modes.c. Checks (never trusting what student code prints):
 *   buckets.*   membership, order, offsets and views against the bucketing rule, in whole
 *               bytes as PyTorch counts them, at caps on a bucket boundary and +-1 byte
 *   equal.*     after k steps every rank's parameters are bit-identical, and within 1e-5
 *               (relative Frobenius) of single-rank training on the same global batch
 *   calls.*     all-reduce calls per step = parameters (naive) or buckets; nothing else
 *   order.*     the all-reduces of a step run in bucket order (sizes, from the trace)
 *   overlap.*   every bucket's all-reduce starts while backward is still running; the
 *               fraction of all-reduce time inside backward is reported
 *   nosync      no collective during no_sync micro-steps; the synced step matches
 *   rebuild.*   after the first iteration: buckets in rank 0's observed order, every rank
 * One training run per mode serves its equal/calls/order/overlap cases (computed by the
 * first of them that runs). The data is synthetic: grading never needs Fashion-MNIST.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"

int g_n, g_me, g_hidden = 64, g_batch = 48, g_steps = 4;
uint64_t g_seed;
ds_dataset g_data;
pl_comm *g_comm;
plc_profile g_prof;
bool g_have_prof;
static const char *g_profile = "dgx-h100";
const char *MODE_NAMES[3] = {"naive", "bucketed", "overlap"};

/* ---- one training run per mode: equal / calls / order / overlap -------------------------------- */

typedef struct {
    bool done;
    double rel_err, hash_mismatch, calls, callsmin, other, launched_in_bwd, frac, frac0, pred_overlap, pred_bwd_us;
    int want, order_bad;
    char order_why[256];
} run_stats;
static run_stats g_runs[3];

/* After training: do the ranks hold the same bits, and how far is that from the single-rank
 * reference? Then free both models and the DDP state. */
static void compare_and_free(mlp *m, mlp *ref, ddp_state *d, double *mismatch, double *rel_err) {
    pl_device_sync();
    double h[2];
    param_hash(m, h);
    *mismatch = (drv_max(h[0]) != drv_min(h[0])) || (drv_max(h[1]) != drv_min(h[1]));
    *rel_err = drv_max(param_rel_err(m, ref));
    ddp_free(d);
    mlp_reset_grads(m);
    mlp_free(m);
    mlp_free(ref);
}

static void train_ddp(ddp_mode mode, run_stats *st) {
    /* overlap: one bucket per parameter, so backward fills a later bucket (W3) before an
     * earlier one (b3) and launch order matters */
    const caps *k = &CAPS[mode == DDP_NAIVE ? C_DEFAULT : mode == DDP_OVERLAP ? C_MANY : C_THREE];
    mlp m, ref;
    mlp_init(&m, g_data.dim, g_hidden, g_data.classes, g_batch / g_n, g_seed);
    mlp_init(&ref, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, mode, k->cap, k->first, g_comm);
    for (int step = 0; step < g_steps; step++) {
        int rows, first, nar, *y;
        float *x;
        batch_rows(step, 0, g_me, g_n, &rows, &first);
        load_rows(first, &x, &y);
        mlp_forward(&m, x, y, rows);
        pl_device_sync();
        ddp_backward_begin(&d);
        pl_device_sync();
        pl_metrics_reset();
        pl_trace_clear();
        mlp_backward(&m, &d, rows, false);
        ddp_backward_end(&d);
        pl_device_sync();
        pl_metrics mm;
        pl_metrics_get(&mm);
        size_t sizes[DDP_MAX_PARAMS * 2];
        double in_bwd, frac;
        scan_trace(&nar, sizes, DDP_MAX_PARAMS * 2, &in_bwd, &frac);
        plc_prediction pp = {0};
        bool pred = predict(0, &pp);
        if (step == 0) st->frac0 = drv_sum(frac) / g_n;
        if (step == g_steps - 1) { /* the steady step */
            st->calls = drv_max((double)mm.coll_calls[PL_OP_ALLREDUCE]);
            st->callsmin = drv_min((double)mm.coll_calls[PL_OP_ALLREDUCE]);
            st->other = drv_max((double)mm.coll_total - (double)mm.coll_calls[PL_OP_ALLREDUCE]);
            st->launched_in_bwd = drv_min(in_bwd), st->frac = drv_sum(frac) / g_n;
            st->want = mode == DDP_NAIVE ? NPARAMS : d.nbuckets;
            if (pred) st->pred_overlap = pp.comm_overlap, st->pred_bwd_us = pp.step_time * 1e6;
        }
        /* in bucket order: the k-th all-reduce has the k-th bucket's size */
        for (int b = 0; mode != DDP_NAIVE && !st->order_bad && b < nar && b < d.nbuckets; b++)
            if (sizes[b] != d.buckets[b].numel * sizeof(float)) {
                snprintf(st->order_why, sizeof st->order_why, "step %d: all-reduce %d moved %zu bytes, bucket %d holds %zu",
                         step, b, sizes[b], b, d.buckets[b].numel * sizeof(float));
                st->order_bad = 1;
            }
        mlp_step(&m);
        batch_rows(step, 0, 0, 1, &rows, &first); /* the single-rank reference, same global batch */
        load_rows(first, &x, &y);
        mlp_forward(&ref, x, y, rows);
        mlp_backward(&ref, NULL, rows, false);
        mlp_step(&ref);
    }
    compare_and_free(&m, &ref, &d, &st->hash_mismatch, &st->rel_err);
    st->done = true;
}

/* arg[0] = mode; the first case of a mode trains, the others read its statistics. */
static void train_run(drv_case *c) {
    if (!g_runs[c->arg[0]].done) train_ddp((ddp_mode)c->arg[0], &g_runs[c->arg[0]]);
}

static void equal_check(drv_case *c) {
    const run_stats *st = &g_runs[c->arg[0]];
    drv_num(c, "rel_err", st->rel_err);
    drv_num(c, "ranks_differ", st->hash_mismatch);
    if (st->hash_mismatch) drv_fail(c, "parameters differ between ranks after %d steps", g_steps);
    else drv_check_error(c, "parameters after the steps vs single-rank training", st->rel_err, drv_tolerance());
}

static void calls_check(drv_case *c) {
    const run_stats *st = &g_runs[c->arg[0]];
    drv_num(c, "allreduce_calls", st->calls);
    drv_num(c, "expected_calls", st->want);
    if (st->calls != st->want || st->callsmin != st->want)
        drv_fail(c, "%.0f all-reduce call(s) in a steady step, expected %d (%s)", st->calls, st->want,
                 c->arg[0] == DDP_NAIVE ? "one per parameter" : "one per bucket");
    else if (st->other > 0) drv_fail(c, "%.0f other collective(s) in a steady step, expected none", st->other);
}

static void order_check(drv_case *c) {
    const run_stats *st = &g_runs[c->arg[0]];
    if (st->order_bad) drv_fail(c, "%s", st->order_why); /* rank-local: the runner says which rank */
}

static void overlap_check(drv_case *c) {
    const run_stats *st = &g_runs[c->arg[0]];
    drv_num(c, "launched_in_backward", st->launched_in_bwd);
    drv_num(c, "buckets", st->want);
    drv_num(c, "overlap_fraction", st->frac);
    drv_num(c, "overlap_fraction_step0", st->frac0);
    if (g_have_prof && g_n > 1) {
        drv_num(c, "pred_overlap", st->pred_overlap);
        drv_num(c, "pred_backward_us", st->pred_bwd_us);
        drv_note(c, "all-reduce time inside backward: %.0f%% measured; %s predicts %.0f%% hidden behind compute, backward %.1f us",
                 100 * st->frac, g_prof.name, 100 * st->pred_overlap, st->pred_bwd_us);
    }
    if (st->launched_in_bwd < st->want)
        drv_fail(c, "only %.0f of %d bucket all-reduces started while backward was running", st->launched_in_bwd, st->want);
}

/* ---- nosync: micro-steps 0 and 1 accumulate locally, micro-step 2 synchronises ------------------ */

typedef struct {
    double colls_nosync, calls_sync, rel_err, mismatch;
    int want;
} nosync_stats;

static void nosync_run(drv_case *c) {
    nosync_stats *st = drv_state(c, sizeof *st);
    const int micro = 3, steps = 2;
    mlp m, ref;
    mlp_init(&m, g_data.dim, g_hidden, g_data.classes, g_batch / g_n, g_seed);
    mlp_init(&ref, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, DDP_OVERLAP, CAPS[C_THREE].cap, CAPS[C_THREE].first, g_comm);
    for (int step = 0; step < steps; step++) {
        for (int k = 0; k < micro; k++) {
            int rows, first, *y;
            float *x;
            bool sync = k == micro - 1;
            ddp_set_sync(&d, sync);
            batch_rows(step, k, g_me, g_n, &rows, &first);
            load_rows(first, &x, &y);
            mlp_forward(&m, x, y, rows);
            pl_device_sync();
            ddp_backward_begin(&d);
            pl_device_sync();
            pl_metrics_reset();
            mlp_backward(&m, &d, rows, k > 0);
            ddp_backward_end(&d);
            pl_device_sync();
            pl_metrics mm;
            pl_metrics_get(&mm);
            if (sync) st->calls_sync = (double)mm.coll_calls[PL_OP_ALLREDUCE], st->want = d.nbuckets;
            else st->colls_nosync += (double)mm.coll_total + (double)mm.msgs_sent;
            batch_rows(step, k, 0, 1, &rows, &first);
            load_rows(first, &x, &y);
            mlp_forward(&ref, x, y, rows);
            mlp_backward(&ref, NULL, rows, k > 0);
        }
        mlp_step(&m);
        mlp_step(&ref);
    }
    compare_and_free(&m, &ref, &d, &st->mismatch, &st->rel_err);
}

static void nosync_check(drv_case *c) {
    nosync_stats *st = c->state;
    double colls = drv_max(st->colls_nosync), cs = drv_max(st->calls_sync);
    drv_num(c, "collectives_in_no_sync", colls);
    drv_num(c, "allreduce_calls_synced", cs);
    drv_num(c, "rel_err", st->rel_err);
    if (colls > 0) drv_fail(c, "%.0f collective(s)/message(s) during no_sync micro-steps, expected 0", colls);
    else if (cs != st->want) drv_fail(c, "%.0f all-reduce(s) in the synced micro-step, expected %d (one per bucket)", cs, st->want);
    else if (st->mismatch) drv_fail(c, "parameters differ between ranks after accumulation");
    else drv_check_error(c, "accumulated training vs single-rank", st->rel_err, drv_tolerance());
}

/* ---- the plan --------------------------------------------------------------------------------- */

/* equal.* and calls.* for every mode, order.* for the bucketed ones, overlap.overlap */
static void plan_mode(const drv_test *t, drv_plan *p) {
    int from = !strcmp(t->name, "order") ? DDP_BUCKETED : !strcmp(t->name, "overlap") ? DDP_OVERLAP : DDP_NAIVE;
    for (int m = from; m <= DDP_OVERLAP; m++) {
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, MODE_NAMES[m]);
        snprintf(in->group, sizeof in->group, "%s", MODE_NAMES[m]);
        in->arg[0] = m;
    }
}
/* The order of the old driver: buckets, then per mode equal, calls, order, overlap. */
static const drv_test TESTS[] = {
    {"buckets", "buckets", plan_buckets, NULL, buckets_run, buckets_check, NULL, NULL, buckets_teardown, NULL},
    {"equal", NULL, plan_mode, NULL, train_run, equal_check, NULL, NULL, NULL, NULL},
    {"calls", NULL, plan_mode, NULL, train_run, calls_check, NULL, NULL, NULL, NULL},
    {"order", NULL, plan_mode, NULL, train_run, order_check, NULL, NULL, NULL, NULL},
    {"overlap", NULL, plan_mode, NULL, train_run, overlap_check, NULL, NULL, NULL, NULL},
    {"nosync", "nosync", NULL, NULL, nosync_run, nosync_check, NULL, NULL, NULL, NULL},
    {"rebuild", "rebuild", plan_rebuild, NULL, rebuild_run, rebuild_check, NULL, NULL, rebuild_teardown, NULL},
    {NULL},
};

static void lab6_init(void) {
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    g_seed = pl_info()->seed;
    char err[300];
    g_have_prof = plc_profile_load(&g_prof, g_profile, err, sizeof err) == 0;
    if (!g_have_prof && strcmp(g_profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    if (g_batch < g_n || g_batch % g_n) pl_usage_error("--batch %d is not a positive multiple of the world size %d", g_batch, g_n);
    ds_synthetic(&g_data, (size_t)g_batch * 16 + 64, 784, 10, g_seed);
    drv_print("# lab06: %d rank(s), device %s, MLP 784-%d-%d-10, global batch %d, %d steps\n", g_n,
              pl_device_name(pl_info()->device), g_hidden, g_hidden, g_batch, g_steps);
}

static void lab6_finish(void) { ds_dataset_free(&g_data); }

static const drv_flag FLAGS[] = {
    {"--hidden", DRV_INT, &g_hidden, 1, 4096, "hidden width of the graded MLP (default 64)"},
    {"--batch", DRV_INT, &g_batch, 1, 1 << 20, "global batch of the graded steps (default 48; a multiple of the world size)"},
    {"--steps", DRV_INT, &g_steps, 1, 64, "training steps compared with single-rank training (default 4)"},
    {"--profile", DRV_STR, &g_profile, 0, 0, "NAME|FILE: cost-model profile for the predicted overlap (default dgx-h100)"},
    {"--epochs", DRV_INT, &g_epochs, 1, 1000, "--run train: epochs (default 5)"},
    {"--train-hidden", DRV_INT, &g_train_hidden, 1, 8192, "--run train: hidden width (default 256)"},
    {"--train-batch", DRV_INT, &g_train_batch, 1, 1 << 20, "--run train: global batch (default 64)"},
    {"--lr", DRV_DOUBLE, &g_lr, 1e-9, 100, "--run train: learning rate (default 0.05)"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"train", "train on Fashion-MNIST with the overlapped DDP; loss and accuracy per epoch, a plot", mode_train,
     "2 4", "scripts/plot-train.sh"},
    {"bench", "step time of naive, bucketed and overlapped DDP, measured and predicted (make bench LAB=6)", mode_bench,
     "1 2 4", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "06-ddp",
    .title = "Lab 6: data parallelism with gradient buckets",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab6_init,
    .finish = lab6_finish,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
