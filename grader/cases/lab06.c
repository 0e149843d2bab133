/* lab06.c - the case table of Lab 6 (data parallelism with gradient buckets).
 *
 * The referee (grader/referee/lab06*.c) makes the initial weights and every rank's rows,
 * trains the single-rank reference in float64 and judges; the player (grader/player/
 * lab06*.c) builds the MLP from those weights, runs the student's DDP on its own rows and
 * leaves the final parameters and what it counted in its slots. Checks:
 *   buckets.*   membership, order, offsets and views against the bucketing rule, in whole
 *               bytes as PyTorch counts them, at caps on a bucket boundary and +-1 byte
 *               [the student's state, as the player reads it]
 *   equal.*     after k steps every rank's parameters are bit-identical, and within 1e-5
 *               (relative Frobenius) of single-rank training on the same global batch
 *   calls.*     all-reduce calls per step = parameters (naive) or buckets; nothing else
 *               [the referees' count on the cpu device, else the player's counters]
 *   order.*     the all-reduces of a step run in bucket order (sizes, from the player's
 *               trace) [the player's trace]
 *   overlap.*   every bucket's all-reduce starts in the ddp_grad_ready call that completes
 *               it and the buckets before it (from the recorded order of the calls and the
 *               all-reduces), so communication starts before backward ends; the fraction of
 *               all-reduce time inside backward is reported [the player's trace]
 *   nosync      no collective during no_sync micro-steps [counts: as calls.*]; the
 *               synced step matches
 *   rebuild.*   after the first iteration: buckets in rank 0's observed order, every rank
 *               [the student's state, as the player reads it]; rebuild.nosync: no rebuild
 *               (nor any collective) in a no_sync micro-step, the rebuild at the next synced
 *               one; rebuild.once: none before iteration 1, none again after it (though the
 *               ranks' order changes) [layouts: the player's account; counts: as calls.*]
 *   accumulate.* from non-zero gradients, never zeroed, three synced steps: ddp_init and the
 *               rebuild keep what the gradients hold; equal to single-rank accumulation
 *   every case: no device memory left allocated after ddp_free [the player's accounting]
 * The data is synthetic: grading never needs Fashion-MNIST.
 */
#include <stdio.h>
#include <string.h>

#include "lab06.h"

const char *const LAB6_PNAMES[LAB6_NPARAMS] = {"W1", "b1", "W2", "b2", "W3", "b3"};
const char *const LAB6_MODE_NAMES[3] = {"naive", "bucketed", "overlap"};

static lab6_flags g_flags6 = {.hidden = 64, .batch = 48, .steps = 4, .profile = "dgx-h100", .epochs = 5,
                              .train_hidden = 256, .train_batch = 64, .lr = 0.05};
const lab6_flags *lab6_opts(void) { return &g_flags6; }

/* ---- the model's shapes ---- */

void lab6_shape(int h, int i, int *rows, int *cols, int *fan_in) {
    const int R[LAB6_NPARAMS] = {h, 1, h, 1, LAB6_CLASSES, 1};
    const int C[LAB6_NPARAMS] = {LAB6_IN, h, h, h, h, LAB6_CLASSES};
    const int F[LAB6_NPARAMS] = {LAB6_IN, LAB6_IN, h, h, h, h};
    *rows = R[i], *cols = C[i], *fan_in = F[i];
}

size_t lab6_numel(int h, int i) {
    int r, c, f;
    lab6_shape(h, i, &r, &c, &f);
    return (size_t)r * (size_t)c;
}

size_t lab6_offset(int h, int i) {
    size_t o = 0;
    for (int k = 0; k < i; k++) o += lab6_numel(h, k);
    return o;
}

size_t lab6_total(int h) { return lab6_offset(h, LAB6_NPARAMS); }

/* ---- caps ---- */

/* "negative": cap_mb <= 0 means the default, not only 0 */
const lab6_caps LAB6_CAPS[9] = {{"default", 0, 0, 0},    {"two", 25, 0.01, 0},       {"three", 0.015, 0.001, 0},
                                {"many", 1e-6, 1e-6, 0}, {"boundary", 0, 0, 99},      {"boundary-1", 0, 0, -1},
                                {"boundary+1", 0, 0, 1}, {"boundary+half", 0, 0, 0.5}, {"negative", -1, -0.5, 0}};

/* Boundary caps: the first bucket exactly b3, the others exactly W3 + b2 (reverse order),
 * or one byte less or more: a cap one byte short still closes the bucket there, one more
 * takes the next parameter too; half a byte more is the same cap in whole bytes (PyTorch
 * truncates), so it closes there too. In MiB, exactly (a power-of-two division). */
lab6_caps lab6_caps_of(int k, int h) {
    lab6_caps c = LAB6_CAPS[k];
    if (!c.boundary) return c;
    double first = (double)(lab6_numel(h, P_B3) * 4), other = (double)((lab6_numel(h, P_W3) + lab6_numel(h, P_B2)) * 4);
    c.first = first / 1048576.0;
    c.cap = (other + (c.boundary == 99 ? 0 : c.boundary)) / 1048576.0;
    return c;
}

/* ---- the steps of a run ---- */

int lab6_nsteps(int kind) {
    switch (kind) {
    case RUN_NOSYNC: return 6;
    case RUN_REBUILD: return 2;
    case RUN_LAYOUT: return 0;
    case RUN_ACCUM: return 3;
    case RUN_WHEN: return 5;
    case RUN_LATE: return 3;
    default: return g_flags6.steps;
    }
}

bool lab6_step_syncs(int kind, int k) {
    if (kind == RUN_NOSYNC) return k % 3 == 2;
    if (kind == RUN_LATE) return k != 0;
    return kind != RUN_WHEN || k != 1;
}
bool lab6_step_accumulates(int kind, int k) {
    if (kind == RUN_NOSYNC) return k % 3 > 0;
    if (kind == RUN_WHEN) return k == 2;
    if (kind == RUN_LATE) return k == 1;
    return kind == RUN_ACCUM;
}
bool lab6_step_optimizes(int kind, int k) { return lab6_step_syncs(kind, k); }

/* rebuild.*: ranks other than 0 report b2 before W2 in the first iteration. rebuild.when's
 * run goes on with orders that a second rebuild, or one recorded later, would follow: b3
 * before W3 on every rank in the no_sync micro-step, b1 before W1 in the third synced one. */
unsigned lab6_bias_first(int kind, int k, int rank) {
    /* rebuild.late: the natural order in the no_sync micro-step, then rank 0 b3 before W3
     * (the others b2 before W2) in the first synced one, the order its rebuild follows */
    if (kind == RUN_LATE) return k != 1 ? 0 : rank == 0 ? 1u << 2 : 1u << 1;
    if (kind != RUN_REBUILD && kind != RUN_WHEN) return 0;
    if (k == 0) return rank != 0 ? 1u << 1 : 0;
    if (kind == RUN_WHEN && k == 1) return 1u << 2;
    if (kind == RUN_WHEN && k == 3) return 1u << 0;
    return 0;
}

void lab6_ready_order(unsigned bias_first, int out[LAB6_NPARAMS]) {
    int n = 0;
    for (int layer = 3; layer >= 1; layer--) {
        int w = 2 * (layer - 1), b = w + 1;
        bool swap = bias_first & (1u << (layer - 1));
        out[n++] = swap ? b : w;
        out[n++] = swap ? w : b;
    }
}

/* ---- the plan ---- */

static void plan_buckets(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < (int)(sizeof LAB6_CAPS / sizeof LAB6_CAPS[0]); k++) {
        drv_instance *in = drv_plan_add(p, t, "buckets.%s", LAB6_CAPS[k].name);
        in->arg[0] = LAB6_BUCKETED, in->arg[1] = RUN_LAYOUT, in->arg[2] = k;
    }
}

/* equal.* and calls.* for every mode, order.* for the bucketed ones, overlap.overlap;
 * overlap trains with one bucket per parameter, so backward fills a later bucket (W3)
 * before an earlier one (b3) and launch order matters. */
static void plan_mode(const drv_test *t, drv_plan *p) {
    int from = !strcmp(t->name, "order") ? LAB6_BUCKETED : !strcmp(t->name, "overlap") ? LAB6_OVERLAP : LAB6_NAIVE;
    for (int m = from; m <= LAB6_OVERLAP; m++) {
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, LAB6_MODE_NAMES[m]);
        snprintf(in->group, sizeof in->group, "%s", LAB6_MODE_NAMES[m]);
        in->arg[0] = m, in->arg[1] = RUN_TRAIN;
        in->arg[2] = m == LAB6_NAIVE ? C_DEFAULT : m == LAB6_OVERLAP ? C_MANY : C_THREE;
    }
}

static void plan_nosync(const drv_test *t, drv_plan *p) {
    drv_instance *in = drv_plan_add(p, t, "nosync");
    in->arg[0] = LAB6_OVERLAP, in->arg[1] = RUN_NOSYNC, in->arg[2] = C_THREE;
}

static void plan_rebuild(const drv_test *t, drv_plan *p) {
    static const int caps[2] = {C_THREE, C_MANY};
    for (int i = 0; i < 2; i++) {
        drv_instance *in = drv_plan_add(p, t, "rebuild.%s", LAB6_CAPS[caps[i]].name);
        in->arg[0] = LAB6_OVERLAP, in->arg[1] = RUN_REBUILD, in->arg[2] = caps[i];
    }
}

static void plan_accum(const drv_test *t, drv_plan *p) {
    for (int m = LAB6_BUCKETED; m <= LAB6_OVERLAP; m++) {
        drv_instance *in = drv_plan_add(p, t, "accumulate.%s", LAB6_MODE_NAMES[m]);
        in->arg[0] = m, in->arg[1] = RUN_ACCUM, in->arg[2] = C_THREE;
    }
}

static void plan_when(const drv_test *t, drv_plan *p) {
    drv_instance *in = drv_plan_add(p, t, "%s", t->name);
    in->arg[0] = LAB6_OVERLAP, in->arg[1] = strcmp(t->name, "rebuild.late") ? RUN_WHEN : RUN_LATE, in->arg[2] = C_THREE;
}

#define TRAIN_ROW(nm, grp, planfn, checkfn)                                                                   \
    {.name = nm, .group = grp, .plan = planfn, .setup = DRV_R(lab6_setup), .check = DRV_R(checkfn),           \
     .model = DRV_R(lab6_model), .teardown = DRV_R(lab6_teardown), .play = DRV_P(lab6_play_train)}

/* The order of the old driver: buckets, then per mode equal, calls, order, overlap. */
static const drv_test TESTS[] = {
    {.name = "buckets", .group = "buckets", .plan = plan_buckets, .setup = DRV_R(lab6_setup),
     .check = DRV_R(lab6_buckets_check), .model = DRV_R(lab6_model), .teardown = DRV_R(lab6_teardown),
     .play = DRV_P(lab6_play_buckets)},
    TRAIN_ROW("equal", NULL, plan_mode, lab6_equal_check),
    TRAIN_ROW("calls", NULL, plan_mode, lab6_calls_check),
    TRAIN_ROW("order", NULL, plan_mode, lab6_order_check),
    TRAIN_ROW("overlap", NULL, plan_mode, lab6_overlap_check),
    TRAIN_ROW("nosync", "nosync", plan_nosync, lab6_nosync_check),
    TRAIN_ROW("rebuild", "rebuild", plan_rebuild, lab6_rebuild_check),
    TRAIN_ROW("accumulate", "nosync", plan_accum, lab6_accum_check),
    TRAIN_ROW("rebuild.nosync", "rebuild", plan_when, lab6_when_nosync_check),
    TRAIN_ROW("rebuild.once", "rebuild", plan_when, lab6_when_once_check),
    TRAIN_ROW("rebuild.late", "rebuild", plan_when, lab6_when_late_check),
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--hidden", DRV_INT, &g_flags6.hidden, 1, 4096, "hidden width of the graded MLP (default 64)"},
    {"--batch", DRV_INT, &g_flags6.batch, 1, 1 << 20,
     "global batch of the graded steps (default 48; a multiple of the world size)"},
    {"--steps", DRV_INT, &g_flags6.steps, 1, 64, "training steps compared with single-rank training (default 4)"},
    {"--profile", DRV_STR, &g_flags6.profile, 0, 0,
     "NAME|FILE: cost-model profile for the predicted overlap (default dgx-h100)"},
    {"--epochs", DRV_INT, &g_flags6.epochs, 1, 1000, "--run train: epochs (default 5)"},
    {"--train-hidden", DRV_INT, &g_flags6.train_hidden, 1, 8192, "--run train: hidden width (default 256)"},
    {"--train-batch", DRV_INT, &g_flags6.train_batch, 1, 1 << 20, "--run train: global batch (default 64)"},
    {"--lr", DRV_DOUBLE, &g_flags6.lr, 1e-9, 100, "--run train: learning rate (default 0.05)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"train", "train on Fashion-MNIST with the overlapped DDP; loss and accuracy per epoch, a plot",
     DRV_P(lab6_mode_train), "2 4", "scripts/plot-train.sh"},
    {"bench", "step time of naive, bucketed and overlapped DDP, measured and predicted (make bench LAB=6)",
     DRV_P(lab6_mode_bench), "1 2 4", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "06-ddp",
    .title = "Lab 6: data parallelism with gradient buckets",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(lab6_init),
    .player_init = DRV_P(lab6_player_init),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
