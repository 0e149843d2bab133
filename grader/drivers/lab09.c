/* lab09.c - the driver of Lab 9 (expert parallelism and one-sided communication): the case
 * table, the lab state, and the glue between the referee (lab09_referee.c: inputs,
 * reference, checks on host arrays) and the player (lab09_player.c: device buffers and the
 * student's calls). Modes: lab09_modes.c.
 *
 * Cases:
 *   config.*     moe_config_check on good and bad configurations (every rank the same code)
 *   route.*      the host router and its backward against the float64 reference
 *   alltoallv.*  moe_alltoallv, bit for bit, with its exact bytes to every rank
 *   layer.*      forward and backward of the whole layer, two-sided and one-sided, E = n,
 *                2n, 4n, k = 1, 2, uniform / capacity drops / skewed routing; outputs,
 *                routing, aux loss and every gradient against the reference; bytes to
 *                every rank exact in each direction
 *   reuse.*      several forwards back to back on one state, then a backward
 *   allreduce.*  one-shot and two-shot, bit for bit against the rank-order sum; .reuse:
 *                many calls back to back with new data
 * Waits and barriers of the symmetric-memory cases get random delays (--jitter-us), so a
 * protocol that works only by luck of timing meets the interleaving that breaks it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab09.h"
#include "pl_sym_backend.h" // defines: pl_sym_wire_get (what reached the symmetric backend)

lab9_state L9 = {.tokens = 16, .hidden = 16, .ffn = 24, .reuse_calls = 40, .jitter_us = 300, .profile = "dgx-h100"};

/* ---- parameters ------------------------------------------------------------------------ */

enum { A_KIND, A_VARIANT, A_DISP, A_E, A_K, A_CALLS, A_COUNT, A_INPLACE };

void l9_params_of(const drv_case *c, l9_params *p) {
    const int64_t *a = c->arg;
    memset(p, 0, sizeof *p);
    p->kind = (l9_kind)a[A_KIND], p->variant = (int)a[A_VARIANT], p->disp = (int)a[A_DISP];
    p->E = (int)a[A_E], p->k = (int)a[A_K], p->calls = a[A_CALLS] > 0 ? (int)a[A_CALLS] : 1;
    p->count = a[A_COUNT], p->in_place = a[A_INPLACE] != 0;
    p->T = L9.tokens, p->H = L9.hidden, p->F = L9.ffn, p->alpha = 0.01;
    switch (p->kind) {
    case K_CONFIG:
        p->T = 4, p->H = 8, p->F = 8, p->E = 2 * L9.n, p->k = 2, p->cf = 1.25;
        if (p->variant == CFG_SHAPE) p->H = 0;
        if (p->variant == CFG_TOPK3) p->k = 3;
        if (p->variant == CFG_TOPK_GT_E) p->E = 1;
        if (p->variant == CFG_CAP0) p->cf = 0;
        if (p->variant == CFG_CAPNEG) p->cf = -1;
        if (p->variant == CFG_EXPERTS) p->E = L9.n + 1;
        break;
    case K_ROUTE: p->cf = p->variant == V_UNIFORM ? 2.0 : p->variant == V_DROPS ? 0.5 : 1.0; break;
    case K_LAYER:
    case K_REUSE: p->cf = p->variant == V_UNIFORM ? 2.0 : p->variant == V_DROPS ? 0.5 : (double)p->E; break;
    default: break;
    }
}

moe_config l9_config_of(const l9_params *p) {
    return (moe_config){p->T, p->H, p->F, p->E, p->k, (float)p->cf, (float)p->alpha, L9.comm};
}

/* ---- one case: setup (inputs), run (the student), check (the referee) -------------------- */

typedef struct {
    l9_params p;
    l9_inputs in;
    l9_outputs out;
    l9_player *pl;
    uint64_t seed, pub;
    pl_sym_wire w0;
} l9_case;

static void l9_setup(drv_case *c) {
    l9_case *k = drv_state(c, sizeof *k);
    l9_params_of(c, &k->p);
    k->seed = drv_case_seed(c); /* this rank's inputs: the others learn it after the call */
    k->pub = l9_public_seed(c);
    l9_inputs_make(&k->p, L9.me, k->seed, k->pub, &k->in);
    l9_outputs_alloc(&k->p, &k->out);
    k->pl = l9_player_setup(&k->p, &k->in);
    pl_sym_wire_get(&k->w0);
}

static void l9_run(drv_case *c) {
    l9_case *k = c->state;
    l9_player_run(k->pl, &k->p, &k->in, &k->out, k->seed ^ 0x6A177E5ull);
}

static void l9_check(drv_case *c) {
    l9_case *k = c->state;
    if (!c->ran) return;
    pl_sym_wire w1;
    pl_sym_wire_get(&w1);
    double mismatch = c->m.puts != w1.puts - k->w0.puts || c->m.put_bytes != w1.put_bytes - k->w0.put_bytes ||
                      c->m.signals != w1.signals - k->w0.signals;
    if (drv_max(mismatch) > 0)
        drv_forbid(c, "the counted one-sided traffic differs from what reached the symmetric-memory backend");
    l9_player_collect(k->pl, &k->p, &k->out);
    uint64_t *seeds = calloc((size_t)L9.n, sizeof *seeds);
    PL_CHECK(seeds != NULL, "out of host memory");
    drv_allgather_u64(k->seed, seeds); /* only now: every rank's inputs */
    l9_referee_check(c, &k->p, &k->in, &k->out, seeds, k->pub);
    free(seeds);
    if (k->p.kind == K_ROUTE && drv_max((double)(c->m.puts + c->m.msgs_sent + c->m.coll_total)) > 0)
        drv_fail(c, "the router communicated: it is host code on this rank's tokens only");
}

static void l9_model(drv_case *c, drv_model *m) {
    l9_case *k = c->state;
    if (k->p.kind == K_ROUTE) m->no_collectives = m->no_p2p = true;
    if (k->p.kind == K_AR) m->no_collectives = m->no_p2p = true;
    if (k->p.kind != K_A2A) return;
    m->no_collectives = true;
    double bytes = 0, msgs = 0;
    for (int q = 0; q < L9.n; q++)
        if (q != L9.me && k->in.send_counts[q] > 0) bytes += 4.0 * k->in.send_counts[q], msgs++;
    m->exact_p2p = true, m->p2p_bytes = bytes, m->p2p_msgs = msgs;
    m->bytes_optimal = bytes, m->bytes_agg = DRV_BYTES_AVG;
}

static void l9_teardown(drv_case *c) {
    l9_case *k = c->state;
    l9_player_free(k->pl);
    l9_inputs_free(&k->in);
    l9_outputs_free(&k->out);
}

/* ---- the plan --------------------------------------------------------------------------- */

static const char *VARIANTS[] = {"uniform", "drops", "skew"};
static const char *CFG_NAMES[CFG_COUNT] = {"ok", "shape", "topk3", "topk_gt_experts", "capacity0", "capacity_negative",
                                           "experts_not_multiple", "hidden_mismatch"};
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
    int n = L9.n;
    for (int v = 0; v < CFG_COUNT; v++)
        if (n > 1 || (v != CFG_EXPERTS && v != CFG_MISMATCH))
            add(pp, t, "config", K_CONFIG, v, 0, 0, 0, 1, 0, 0, "config.%s", CFG_NAMES[v]);
    for (int k = 1; k <= 2; k++)
        for (int E = 4; E <= 8; E += 4)
            for (int v = 0; v < 3; v++) add(pp, t, "route", K_ROUTE, v, 0, E, k, 1, 0, 0, "route.k%d.E%d.%s", k, E, VARIANTS[v]);
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
        add(pp, t, group, K_AR, 0, d, 0, 0, L9.reuse_calls, 16387, 0, "allreduce.%s.reuse.c16387", dn);
    }
}

static const drv_test TESTS[] = {
    {.name = "moe", .plan = plan, .setup = l9_setup, .run = l9_run, .check = l9_check, .model = l9_model,
     .teardown = l9_teardown},
    {NULL},
};

static void l9_init(void) {
    L9.comm = pl_comm_world();
    L9.n = pl_comm_size(L9.comm);
    L9.me = pl_comm_rank(L9.comm);
    drv_print("# lab09: %d rank(s), device %s, comm %s, symmetric memory %s (%s); tokens %d, hidden %d, ffn %d per rank\n",
              L9.n, pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm), pl_sym_impl(), pl_sym_why(),
              L9.tokens, L9.hidden, L9.ffn);
}

static const drv_flag FLAGS[] = {
    {"--tokens", DRV_INT, &L9.tokens, 1, 4096, "tokens per rank in the route and layer cases (default 16)"},
    {"--hidden", DRV_INT, &L9.hidden, 1, 4096, "hidden size of the layer cases (default 16)"},
    {"--ffn", DRV_INT, &L9.ffn, 1, 16384, "each expert's inner width (default 24)"},
    {"--reuse-calls", DRV_INT, &L9.reuse_calls, 2, 100000, "back-to-back all-reduces in the .reuse cases (default 40)"},
    {"--jitter-us", DRV_DOUBLE, &L9.jitter_us, 0, 1e6, "random delay after symmetric waits and barriers, us (default 300)"},
    {"--profile", DRV_STR, &L9.profile, 0, 0, "cost-model profile of the bench's prediction (default dgx-h100)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"route", "tokens per expert per step under uniform and skewed routing, the aux loss pulling a router back to balance (PNG)",
     l9_mode_route, "2", "scripts/plot-lab9-route.sh"},
    {"bench", "dispatch/combine two-sided vs one-sided by tokens per rank; all-reduce latency 1 KiB-16 MiB with its crossover, "
              "measured and predicted", l9_mode_bench, "2 4", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "09-moe",
    .title = "Lab 9: expert parallelism (a top-k MoE layer, two-sided and one-sided dispatch) and one-shot / two-shot all-reduce",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = l9_init,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
