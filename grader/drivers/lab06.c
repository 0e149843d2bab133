/* lab06.c - the driver of Lab 6 (data parallelism with gradient buckets).
 *
 * The model and the data are in lab06_model.c; the bench and training modes in
 * lab06_modes.c. Checks (never trusting what student code prints):
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

/* ---- the bucketing rule ---------------------------------------------------------------------- */

typedef struct {
    int nbuckets, nparams[DDP_MAX_PARAMS], params[DDP_MAX_PARAMS][DDP_MAX_PARAMS];
} layout;

/* A bucket closes once its size in whole bytes reaches its cap: PyTorch takes the cap as
 * int(cap_mb * 1024 * 1024) bytes, so the comparison is between integers. */
static size_t cap_bytes(double mb) { return (size_t)(mb * 1048576.0); }

static layout expected_layout(const mlp *m, const int *order, double cap_mb, double first_mb) {
    layout L;
    memset(&L, 0, sizeof L);
    size_t bytes = 0;
    for (int k = 0; k < NPARAMS; k++) {
        if (L.nbuckets == 0 || bytes >= cap_bytes(L.nbuckets == 1 ? first_mb : cap_mb)) L.nbuckets++, bytes = 0;
        int b = L.nbuckets - 1;
        L.params[b][L.nparams[b]++] = order[k];
        bytes += m->p[order[k]].numel * sizeof(float);
    }
    return L;
}

/* Does the student's state hold layout L with gradient views? Fails the case if not. */
static void check_layout(drv_case *c, const ddp_state *d, const mlp *m, const layout *L, const char *when) {
    char why[256] = "";
    for (int b = 0; b < L->nbuckets && !why[0] && d->nbuckets == L->nbuckets; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        if (bk->nparams != L->nparams[b]) {
            snprintf(why, sizeof why, "bucket %d holds %d parameter(s), expected %d", b, bk->nparams, L->nparams[b]);
            break;
        }
        size_t off = 0;
        for (int j = 0; j < bk->nparams && !why[0]; j++) {
            int i = L->params[b][j];
            if (bk->params[j] != i)
                snprintf(why, sizeof why, "bucket %d position %d is %s, expected %s", b, j,
                         bk->params[j] >= 0 && bk->params[j] < NPARAMS ? PNAMES[bk->params[j]] : "?", PNAMES[i]);
            else if (bk->offsets[j] != off)
                snprintf(why, sizeof why, "bucket %d: %s at offset %zu, expected %zu", b, PNAMES[i], bk->offsets[j], off);
            else if (!bk->buf || m->p[i].grad != bk->buf + off)
                snprintf(why, sizeof why, "%s's gradient is not a view of bucket %d at offset %zu", PNAMES[i], b, off);
            off += m->p[i].numel;
        }
        if (!why[0] && bk->numel != off)
            snprintf(why, sizeof why, "bucket %d has %zu elements, its parameters %zu", b, bk->numel, off);
    }
    if (d->nbuckets != L->nbuckets) snprintf(why, sizeof why, "%d bucket(s), expected %d", d->nbuckets, L->nbuckets);
    drv_num(c, "buckets", d->nbuckets);
    drv_num(c, "expected_buckets", L->nbuckets);
    if (why[0]) drv_fail(c, "%s%s", when, why);
}

static const int REVERSE[NPARAMS] = {P_B3, P_W3, P_B2, P_W2, P_B1, P_W1};
static const int OBSERVED[NPARAMS] = {P_W3, P_B3, P_W2, P_B2, P_W1, P_B1};

typedef struct {
    const char *name;
    double cap, first; /* MiB; for the boundary caps, set by cap_for() */
    double boundary;   /* 0, or bytes around a bucket boundary: -1, +1, +0.5 (99 = exact) */
} caps;
static const caps CAPS[] = {{"default", 0, 0, 0}, {"two", 25, 0.01, 0}, {"three", 0.015, 0.001, 0},
                            {"many", 1e-6, 1e-6, 0}, {"boundary", 0, 0, 99}, {"boundary-1", 0, 0, -1},
                            {"boundary+1", 0, 0, 1}, {"boundary+half", 0, 0, 0.5}};
enum { C_DEFAULT, C_TWO, C_THREE, C_MANY };

/* Boundary caps: the first bucket exactly b3, the others exactly W3 + b2 (reverse order),
 * or one byte less or more: a cap one byte short still closes the bucket there, one more
 * takes the next parameter too; half a byte more is the same cap in whole bytes (PyTorch
 * truncates), so it closes there too. In MiB, exactly (a power-of-two division). */
static caps cap_for(const caps *c, const mlp *m) {
    caps k = *c;
    if (!c->boundary) return k;
    double first = (double)(m->p[P_B3].numel * 4), other = (double)((m->p[P_W3].numel + m->p[P_B2].numel) * 4);
    k.first = first / 1048576.0;
    k.cap = (other + (c->boundary == 99 ? 0 : c->boundary)) / 1048576.0;
    return k;
}

/* ---- buckets.*: arg[0] = the caps ------------------------------------------------------------- */

typedef struct {
    mlp m;
    ddp_state d;
    caps k;
} bucket_case;

static void buckets_run(drv_case *c) {
    bucket_case *s = calloc(1, sizeof *s);
    PL_CHECK(s != NULL, "out of host memory");
    c->state = s;
    mlp_init(&s->m, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    s->k = cap_for(&CAPS[c->arg[0]], &s->m);
    ddp_init(&s->d, s->m.p, NPARAMS, DDP_BUCKETED, s->k.cap, s->k.first, g_comm);
}
static void buckets_check(drv_case *c) {
    bucket_case *s = c->state;
    layout L = expected_layout(&s->m, REVERSE, s->k.cap > 0 ? s->k.cap : 25, s->k.first > 0 ? s->k.first : 1);
    check_layout(c, &s->d, &s->m, &L, "");
}
static void buckets_teardown(drv_case *c) {
    bucket_case *s = c->state;
    if (!s) return;
    ddp_free(&s->d);
    mlp_reset_grads(&s->m);
    mlp_free(&s->m);
    free(s);
}

/* ---- one training run per mode: equal / calls / order / overlap -------------------------------- */

typedef struct {
    bool done;
    double rel_err, hash_mismatch, calls, callsmin, other, launched_in_bwd, frac, frac0, pred_overlap, pred_bwd_us;
    int want, order_bad;
    char order_why[256];
} run_stats;
static run_stats g_runs[3];

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
    pl_device_sync();
    double h[2];
    param_hash(&m, h);
    st->hash_mismatch = (drv_max(h[0]) != drv_min(h[0])) || (drv_max(h[1]) != drv_min(h[1]));
    st->rel_err = drv_max(param_rel_err(&m, &ref));
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    mlp_free(&ref);
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
    nosync_stats *st = calloc(1, sizeof *st);
    PL_CHECK(st != NULL, "out of host memory");
    c->state = st;
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
    pl_device_sync();
    double h[2];
    param_hash(&m, h);
    st->mismatch = (drv_max(h[0]) != drv_min(h[0])) || (drv_max(h[1]) != drv_min(h[1]));
    st->rel_err = drv_max(param_rel_err(&m, &ref));
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    mlp_free(&ref);
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

/* ---- rebuild.*: ranks other than 0 report b2 before W2 in the first iteration; after it every
 * rank must hold the layout of rank 0's observed order. arg[0] = the caps. ------------------- */

typedef struct {
    mlp m;
    ddp_state d;
    int rows;
    bool bad;
} rebuild_case;

static void rebuild_run(drv_case *c) {
    rebuild_case *s = calloc(1, sizeof *s);
    PL_CHECK(s != NULL, "out of host memory");
    c->state = s;
    mlp_init(&s->m, g_data.dim, g_hidden, g_data.classes, g_batch / g_n, g_seed);
    s->m.swap_w2_b2_hooks = g_me != 0;
    const caps *k = &CAPS[c->arg[0]];
    ddp_init(&s->d, s->m.p, NPARAMS, DDP_OVERLAP, k->cap, k->first, g_comm);
    int first, *y;
    float *x;
    batch_rows(0, 0, g_me, g_n, &s->rows, &first);
    load_rows(first, &x, &y);
    mlp_forward(&s->m, x, y, s->rows);
    ddp_backward_begin(&s->d);
    mlp_backward(&s->m, &s->d, s->rows, false);
    ddp_backward_end(&s->d);
    mlp_step(&s->m);
    pl_device_sync();
    s->m.swap_w2_b2_hooks = 0;
    ddp_backward_begin(&s->d); /* the rebuild happens here */
}

static void rebuild_check(drv_case *c) {
    rebuild_case *s = c->state;
    const caps *k = &CAPS[c->arg[0]];
    layout L = expected_layout(&s->m, OBSERVED, k->cap, k->first);
    check_layout(c, &s->d, &s->m, &L, "after iteration 1 (expected rank 0's order W3 b3 W2 b2 W1 b1): ");
    s->bad = drv_max(drv_failed(c)) > 0;
}

/* Finish the iteration so every rank leaves the same collectives behind. */
static void rebuild_teardown(drv_case *c) {
    rebuild_case *s = c->state;
    mlp_backward(&s->m, &s->d, s->rows, false);
    if (s->bad) ddp_set_sync(&s->d, false);
    ddp_backward_end(&s->d);
    ddp_free(&s->d);
    mlp_reset_grads(&s->m);
    mlp_free(&s->m);
    free(s);
}

static void free_state(drv_case *c) { free(c->state); }

/* ---- the plan --------------------------------------------------------------------------------- */

static void plan_buckets(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < (int)(sizeof CAPS / sizeof CAPS[0]); k++) drv_plan_add(p, t, "buckets.%s", CAPS[k].name)->arg[0] = k;
}
/* equal.* and calls.* for every mode, order.* for the bucketed ones, overlap.overlap */
static void plan_mode(const drv_test *t, drv_plan *p) {
    int from = !strcmp(t->name, "order") ? DDP_BUCKETED : !strcmp(t->name, "overlap") ? DDP_OVERLAP : DDP_NAIVE;
    for (int m = from; m <= DDP_OVERLAP; m++) {
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, MODE_NAMES[m]);
        snprintf(in->group, sizeof in->group, "%s", MODE_NAMES[m]);
        in->arg[0] = m;
    }
}
static void plan_rebuild(const drv_test *t, drv_plan *p) {
    drv_plan_add(p, t, "rebuild.three")->arg[0] = C_THREE;
    drv_plan_add(p, t, "rebuild.many")->arg[0] = C_MANY;
}

/* The order of the old driver: buckets, then per mode equal, calls, order, overlap. */
static const drv_test TESTS[] = {
    {"buckets", "buckets", plan_buckets, NULL, buckets_run, buckets_check, NULL, NULL, buckets_teardown, NULL},
    {"equal", NULL, plan_mode, NULL, train_run, equal_check, NULL, NULL, NULL, NULL},
    {"calls", NULL, plan_mode, NULL, train_run, calls_check, NULL, NULL, NULL, NULL},
    {"order", NULL, plan_mode, NULL, train_run, order_check, NULL, NULL, NULL, NULL},
    {"overlap", NULL, plan_mode, NULL, train_run, overlap_check, NULL, NULL, NULL, NULL},
    {"nosync", "nosync", NULL, NULL, nosync_run, nosync_check, NULL, NULL, free_state, NULL},
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
