/* lab09.c - the case table of Lab 9 (expert parallelism and one-sided communication).
 *
 * Cases:
 *   config.*     moe_config_check on good and bad configurations (every rank the same code)
 *   route.*      the host router and its backward against the float64 reference (ties:
 *                every token's k-th and (k+1)-th logits equal, the lower index wins)
 *   alltoallv.*  moe_alltoallv, bit for bit, with its exact bytes to every rank
 *   layer.*      forward and backward of the whole layer, two-sided and one-sided, E = n,
 *                2n, 4n, k = 1, 2, uniform / capacity drops / skewed routing; outputs,
 *                routing, aux loss and every gradient against the reference; bytes to
 *                every rank exact in each direction
 *   reuse.*      several forwards back to back on one state, then a backward
 *   allreduce.*  one-shot and two-shot, bit for bit against the rank-order sum; .reuse:
 *                many calls back to back with new data
 * The referee (grader/referee/lab09*.c) makes each rank's inputs from a seed only referees
 * know, computes the float64 reference of the whole layer from every rank's inputs and
 * judges; the player (grader/player/lab09.c) makes the student's calls on the slots. Waits,
 * barriers and signals of the symmetric-memory cases get random delays (--jitter-us): a
 * sender held up between two peers lets signals of a later phase overtake those of an
 * earlier one, so a protocol that works only by luck of timing meets the interleaving that
 * breaks it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"

lab9_flags L9 = {.tokens = 16, .hidden = 16, .ffn = 24, .reuse_calls = 40, .jitter_us = 300, .profile = "dgx-h100"};

/* ---- parameters ------------------------------------------------------------------------ */

void l9_params_of(const drv_case *c, l9_params *p) {
    const int64_t *a = c->arg;
    memset(p, 0, sizeof *p);
    p->kind = (l9_kind)a[A_KIND], p->variant = (int)a[A_VARIANT], p->disp = (int)a[A_DISP];
    p->n = c->world;
    p->E = (int)a[A_E], p->k = (int)a[A_K], p->calls = a[A_CALLS] > 0 ? (int)a[A_CALLS] : 1;
    p->count = a[A_COUNT], p->in_place = a[A_INPLACE] != 0;
    p->T = L9.tokens, p->H = L9.hidden, p->F = L9.ffn, p->alpha = 0.01;
    switch (p->kind) {
    case K_CONFIG:
        p->T = 4, p->H = 8, p->F = 8, p->E = 2 * p->n, p->k = 2, p->cf = 1.25;
        int v = p->variant;
        if (v == CFG_SHAPE || v == CFG_SHAPE_TOPK || v == CFG_MISMATCH_SHAPE) p->H = 0;
        if (v == CFG_TOPK3 || v == CFG_SHAPE_TOPK || v == CFG_TOPK_CAP) p->k = 3;
        if (v == CFG_TOPK_GT_E) p->E = 1;
        if (v == CFG_CAP0 || v == CFG_TOPK_CAP || v == CFG_CAP_EXPERTS) p->cf = 0;
        if (v == CFG_CAPNEG) p->cf = -1;
        if (v == CFG_EXPERTS || v == CFG_CAP_EXPERTS) p->E = p->n + 1;
        break;
    case K_ROUTE: p->cf = p->variant == V_UNIFORM ? 2.0 : p->variant == V_DROPS ? 0.5 : 1.0; break;
    case K_LAYER:
    case K_REUSE: p->cf = p->variant == V_UNIFORM ? 2.0 : p->variant == V_DROPS ? 0.5 : (double)p->E; break;
    default: break;
    }
}

/* ---- the plan --------------------------------------------------------------------------- */

static const char *VARIANTS[] = {"uniform", "drops", "skew", "ties"};
static const char *CFG_NAMES[CFG_COUNT] = {"ok", "shape", "topk3", "topk_gt_experts", "capacity0", "capacity_negative",
                                           "experts_not_multiple", "hidden_mismatch", "shape_and_topk3",
                                           "topk3_and_capacity0", "capacity0_and_experts", "mismatch_and_shape"};
static const char *A2A_NAMES[] = {"random", "empty", "skew"};

static drv_instance *add(drv_plan *pp, const drv_test *t, const char *group, l9_kind kind, int variant, int disp, int E,
                         int k, int calls, int64_t count, int ip, const char *fmt, ...) __attribute__((format(printf, 12, 13)));
static drv_instance *add(drv_plan *pp, const drv_test *t, const char *group, l9_kind kind, int variant, int disp, int E,
                         int k, int calls, int64_t count, int ip, const char *fmt, ...) {
    char name[DRV_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    drv_instance *in = drv_plan_add(pp, t, "%s", name);
    snprintf(in->group, sizeof in->group, "%s", group);
    int64_t a[DRV_ARGS] = {kind, variant, disp, E, k, calls, count, ip};
    memcpy(in->arg, a, sizeof a);
    return in;
}

static void plan(const drv_test *t, drv_plan *pp) {
    int n = pl_world();
    for (int v = 0; v < CFG_COUNT; v++)
        if (n > 1 || !CFG_NEEDS_RANKS(v))
            add(pp, t, "config", K_CONFIG, v, 0, 0, 0, 1, 0, 0, "config.%s", CFG_NAMES[v]);
    for (int k = 1; k <= 2; k++)
        for (int E = 4; E <= 8; E += 2) /* E = 6: T k / E is not whole, the capacity's ceiling matters */
            for (int v = 0; v < 4; v++) add(pp, t, "route", K_ROUTE, v, 0, E, k, 1, 0, 0, "route.k%d.E%d.%s", k, E, VARIANTS[v]);
    for (int v = 0; v < 3; v++) add(pp, t, "alltoallv", K_A2A, v, 0, 0, 0, 1, 0, 0, "alltoallv.%s", A2A_NAMES[v]);
    for (int d = 0; d < 2; d++) {
        const char *dn = d ? "one" : "two", *group = d ? "layer_one_sided" : "layer_two_sided";
        for (int mult = 1; mult <= 4; mult *= 2)
            for (int k = 1; k <= 2; k++)
                for (int v = 0; v < 3; v++)
                    if (k <= mult * n)
                        add(pp, t, group, K_LAYER, v, d, mult * n, k, 1, 0, 0, "layer.%s.E%dn.k%d.%s", dn, mult, k, VARIANTS[v]);
        add(pp, t, group, K_REUSE, V_DROPS, d, 2 * n, 2, 4, 0, 0, "reuse.%s.E2n.k2", dn);
    }
    static const int64_t counts[] = {0, 1, 7, 1000, 65539};
    for (int d = 0; d < 2; d++) {
        const char *dn = d ? "twoshot" : "oneshot", *group = d ? "allreduce_twoshot" : "allreduce_oneshot";
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            add(pp, t, group, K_AR, 0, d, 0, 0, 1, counts[i], 0, "allreduce.%s.c%lld", dn, (long long)counts[i]);
        add(pp, t, group, K_AR, 0, d, 0, 0, 3, 1000, 1, "allreduce.%s.ip.c1000", dn);
        /* 1 KiB, also timed (perf) against the library's all-reduce, calls back to back */
        add(pp, t, group, K_AR, AR_TIMED, d, 0, 0, 1, 256, 0, "allreduce.%s.timed.c256", dn);
        add(pp, t, group, K_AR, 0, d, 0, 0, L9.reuse_calls, 16387, 0, "allreduce.%s.reuse.c16387", dn);
    }
}

static const drv_test TESTS[] = {
    {.name = "moe", .plan = plan, .setup = DRV_R(lab9_setup), .check = DRV_R(lab9_check), .model = DRV_R(lab9_model),
     .perf = DRV_R(lab9_perf), .refresh = DRV_R(lab9_refresh), .verify = DRV_R(lab9_verify),
     .teardown = DRV_R(lab9_teardown), .play = DRV_P(lab9_play), .timed = DRV_P(lab9_timed),
     .release = DRV_P(lab9_release)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--tokens", DRV_INT, &L9.tokens, 1, 4096, "tokens per rank in the route and layer cases (default 16)"},
    {"--hidden", DRV_INT, &L9.hidden, 1, 4096, "hidden size of the layer cases (default 16)"},
    {"--ffn", DRV_INT, &L9.ffn, 1, 16384, "each expert's inner width (default 24)"},
    {"--reuse-calls", DRV_INT, &L9.reuse_calls, 2, 100000, "back-to-back all-reduces in the .reuse cases (default 40)"},
    {"--jitter-us", DRV_DOUBLE, &L9.jitter_us, 0, 1e6, "random delay after symmetric waits and barriers and before signals, us (default 300)"},
    {"--profile", DRV_STR, &L9.profile, 0, 0, "cost-model profile of the bench's prediction (default dgx-h100)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"route", "tokens per expert per step under uniform and skewed routing, the aux loss pulling a router back to balance (PNG)",
     DRV_P(lab9_mode_route), "2", "scripts/plot-lab9-route.sh"},
    {"bench", "dispatch/combine two-sided vs one-sided by tokens per rank; all-reduce latency 1 KiB-16 MiB with its crossover, "
              "measured and predicted", DRV_P(lab9_mode_bench), "2 4", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "09-moe",
    .title = "Lab 9: expert parallelism (a top-k MoE layer, two-sided and one-sided dispatch) and one-shot / two-shot all-reduce",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(lab9_init),
    .player_init = DRV_P(lab9_player_init),
    .player_mpi = true, /* symmetric memory: MPI windows the player maps itself */
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
