/* lab08.c - the driver of Lab 8 (3D parallelism): flags, the case table, the lab's state,
 * and the glue of each case: the referee's inputs (lab08_referee*.c) to the player
 * (lab08_player.c), the player's host outputs back to the referee's checks.
 *
 *   config.errors        td_config_check on good and bad configurations (no MPI at all)
 *   grid.t<t>p<p>d<d>    td_grid_build for every t, p with t p | N: each group's members,
 *                        in order, against the rule rank = tp + t (dp + d pp)
 *   grid.errors          a world that t p does not divide, t or p < 1: TD_ERR_WORLD on
 *                        every rank, the grid untouched, nothing built
 *   embed.t<t>           the vocabulary-parallel embedding at t ranks: x, dwte, dwpe against
 *                        the whole-vocabulary reference; one all-reduce forward, none back
 *   xent.t<t>            the parallel cross-entropy: losses and dlogits; three all-reduces
 *                        of N floats, the logits never gathered
 *   step.t<t>p<p>d<d>    k training steps on the kit's grid: loss, global gradient norm
 *                        and every parameter against the single-rank run (1e-5)
 *   traffic.t<t>p<p>d<d> the first step's traffic, group by group, against the formulas
 * Modes: plan (the planner), bench (Table 1 of the Megatron-LM paper, the tiny GPT).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"
#include "pl_instrument.h" // defines: pl_host_bcast (the replica's private seed to its tensor group)

static l8_state g_state = {.T = 8, .b = 2, .C = 32, .H = 8, .F = 64, .V = 64, .L = 8, .steps = 2, .lr = 1e-2,
                           .clip = 0.25, .profile = "dgx-a100", .model = "all", .gpus = 0, .gbatch = 0, .top = 8,
                           .bench_steps = 5};

static l8_state *state_of(const drv_case *c) { return (l8_state *)c->inst->test->data; }

/* The (t, p, d) the step cases run at N ranks: those of the lab's list with t p d = N,
 * else (N, 1, 1), (1, N, 1), (1, 1, N) where the model allows them. */
static void step_configs(l8_state *S, int N) {
    static const l8_tpd LIST[] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 1}, {2, 1, 2}, {1, 2, 2},
                                  {2, 2, 2}, {4, 2, 1}, {1, 4, 2}, {8, 1, 1}, {1, 8, 1}, {1, 1, 8}};
    S->ncfgs = 0;
    for (size_t i = 0; i < sizeof LIST / sizeof LIST[0]; i++)
        if (LIST[i].t * LIST[i].p * LIST[i].d == N && S->ncfgs < L8_MAX_CONFIGS) S->cfgs[S->ncfgs++] = LIST[i];
    if (S->ncfgs) return;
    l8_tpd more[3] = {{N, 1, 1}, {1, N, 1}, {1, 1, N}};
    for (int i = 0; i < 3; i++) {
        td_config c = l8_config(S, more[i].t, more[i].p);
        if (c.heads % c.t == 0 && c.ffn % c.t == 0 && c.vocab % c.t == 0 && c.p <= c.layers)
            S->cfgs[S->ncfgs++] = more[i];
    }
}

/* ==================================================================================== */
/* config.errors                                                                          */
/* ==================================================================================== */

typedef struct {
    l8_config_case cases[32];
    int codes[32], n;
} config_state;

static void config_setup(drv_case *c) {
    config_state *x = drv_state(c, sizeof *x);
    x->n = l8_config_cases(state_of(c), x->cases, 32);
}
static void config_run(drv_case *c) {
    config_state *x = c->state;
    l8_play_config(x->cases, x->n, x->codes);
}
static void config_check(drv_case *c) {
    config_state *x = c->state;
    for (int i = 0; i < x->n; i++)
        if (x->codes[i] != x->cases[i].want) {
            drv_fail(c, "td_config_check(%s) returned %d (%s), expected %d (%s)", x->cases[i].what, x->codes[i],
                     td_error_string(x->codes[i]), x->cases[i].want, td_error_string(x->cases[i].want));
            return;
        }
    drv_note(c, "%d configurations: the right code for each", x->n);
}

/* ==================================================================================== */
/* grid.*                                                                                 */
/* ==================================================================================== */

static void plan_grid(const drv_test *t, drv_plan *p) {
    int N = pl_world();
    for (int tt = 1; tt <= N; tt++)
        for (int pp = 1; tt * pp <= N; pp++) {
            if (N % (tt * pp)) continue;
            drv_instance *in = drv_plan_add(p, t, "grid.t%dp%dd%d", tt, pp, N / (tt * pp));
            in->arg[0] = tt, in->arg[1] = pp;
        }
}

static void grid_run(drv_case *c) {
    l8_grid_out *x = drv_state(c, sizeof *x);
    l8_play_grid((int)c->arg[0], (int)c->arg[1], x);
}

static void list(char *out, size_t len, const int *v, int n) {
    int w = snprintf(out, len, "[");
    for (int i = 0; i < n && w < (int)len; i++) w += snprintf(out + w, len - (size_t)w, "%s%d", i ? "," : "", v[i]);
    if (w < (int)len) snprintf(out + w, len - (size_t)w, "]");
}

static void grid_check(drv_case *c) {
    const l8_grid_out *x = c->state;
    int t = (int)c->arg[0], p = (int)c->arg[1], N = pl_world(), d = N / (t * p), rank = pl_rank();
    if (!drv_all_ok(c, x->rc, "td_grid_build", td_error_string)) return;
    int tp, dp, pp;
    l8_coords(rank, t, d, &tp, &dp, &pp);
    if (x->t != t || x->p != p || x->d != d || x->tp != tp || x->dp != dp || x->pp != pp)
        drv_fail(c, "t=%d p=%d d=%d: rank %d's grid says sizes %d,%d,%d and (tp, dp, pp) = (%d, %d, %d); the rule gives (%d, %d, %d)",
                 t, p, d, rank, x->t, x->p, x->d, x->tp, x->dp, x->pp, tp, dp, pp);
    const int groups[4] = {L8_TENSOR, L8_DATA, L8_PIPE, L8_EMBED};
    for (int i = 0; i < 4 && !drv_failed(c); i++) {
        int want[TD_MAX_STAGES * 8], n = l8_members(rank, t, p, d, groups[i], want), g = groups[i];
        if (n == x->count[g] && !memcmp(want, x->members[g], (size_t)n * sizeof(int))) continue;
        char a[200], b[200];
        list(a, sizeof a, x->members[g], x->count[g]);
        list(b, sizeof b, want, n);
        drv_fail(c, "t=%d p=%d d=%d: rank %d's %s group is world ranks %s (in its order), the rule gives %s%s", t, p, d, rank,
                 l8_group_name(g), x->count[g] ? a : "(none)", n ? b : "(none: a stage between the first and the last)",
                 g == L8_EMBED ? " (first and last stage of this tp, dp)" : "");
    }
    if (drv_max(drv_failed(c)) == 0) drv_note(c, "every rank in its tensor, data, pipeline and embedding group, in order");
}

typedef struct {
    int rc[5];
    bool touched[5];
    int n;
    char what[5][48];
} grid_err_state;

static void grid_errors_run(drv_case *c) {
    grid_err_state *x = drv_state(c, sizeof *x);
    int N = pl_world(), bad[5][2] = {{0, 1}, {1, 0}, {N + 1, 1}, {1, 2 * N}, {3, 1}};
    x->n = N % 3 && N > 1 ? 5 : 4;
    for (int i = 0; i < x->n; i++) {
        td_grid g;
        memset(&g, 0x5a, sizeof g); /* a pattern the call must leave as it is */
        td_grid keep = g;
        x->rc[i] = td_grid_build(&g, bad[i][0], bad[i][1]);
        x->touched[i] = memcmp(&g, &keep, sizeof g) != 0;
        snprintf(x->what[i], sizeof x->what[i], "t %d, p %d on %d rank(s)", bad[i][0], bad[i][1], N);
        if (x->rc[i] == TD_OK) {
            td_grid_free(&g);
            break;
        }
    }
}

static void grid_errors_check(drv_case *c) {
    grid_err_state *x = c->state;
    for (int i = 0; i < x->n && !drv_failed(c); i++) {
        if (x->rc[i] != TD_ERR_WORLD)
            drv_fail(c, "td_grid_build(%s) returned %d (%s), expected TD_ERR_WORLD", x->what[i], x->rc[i], td_error_string(x->rc[i]));
        else if (x->touched[i])
            drv_fail(c, "td_grid_build(%s) returned TD_ERR_WORLD but wrote into the grid", x->what[i]);
    }
    if (drv_max(drv_failed(c)) == 0) drv_note(c, "%d bad grids: TD_ERR_WORLD on every rank, the grid untouched", x->n);
}

/* ==================================================================================== */
/* embed.*, xent.*                                                                        */
/* ==================================================================================== */

/* The tensor size of the embed and xent cases: the largest divisor of N that divides V. */
static int tensor_size(const l8_state *S, int N) {
    int t = N;
    while (t > 1 && (N % t || S->V % t)) t--;
    return t;
}

static void plan_tensor(const drv_test *t, drv_plan *p) {
    drv_instance *in = drv_plan_add(p, t, "%s.t%d", t->name, tensor_size(t->data, pl_world()));
    in->arg[0] = tensor_size(t->data, pl_world());
}

typedef struct {
    int t, T, b, C, V;
    uint64_t private_seed;       /* this rank's shard: nobody else can know it */
    float *wte, *wpe, *dx, *dwte0, *dwpe0;
    int *tokens;
    l8_embed_out out;
} embed_state;

static void embed_setup(drv_case *c) {
    const l8_state *S = state_of(c);
    embed_state *x = drv_state(c, sizeof *x);
    x->t = (int)c->arg[0], x->T = S->T, x->b = S->b, x->C = S->C, x->V = S->V;
    size_t NC = (size_t)x->T * x->b * x->C, VtC = (size_t)(x->V / x->t) * x->C, TC = (size_t)x->T * x->C;
    x->private_seed = drv_case_seed(c);
    x->wte = malloc(VtC * sizeof(float)), x->wpe = malloc(TC * sizeof(float)), x->dx = malloc(NC * sizeof(float));
    x->dwte0 = malloc(VtC * sizeof(float)), x->dwpe0 = malloc(TC * sizeof(float));
    x->tokens = malloc((size_t)x->T * x->b * sizeof(int));
    x->out.x = malloc(NC * sizeof(float)), x->out.dwte = malloc(VtC * sizeof(float)), x->out.dwpe = malloc(TC * sizeof(float));
    PL_CHECK(x->wte && x->wpe && x->dx && x->dwte0 && x->dwpe0 && x->tokens && x->out.x && x->out.dwte && x->out.dwpe,
             "out of host memory");
    pl_rng_fill_host(x->wte, 1, (int64_t)VtC, (int64_t)VtC, 0, 0, x->private_seed, 1, PL_RNG_NORMAL, 0, 0.5f);
    pl_rng_fill_host(x->wpe, 1, (int64_t)TC, (int64_t)TC, 0, 0, S->seed, 2, PL_RNG_NORMAL, 0, 0.5f);
    pl_rng_fill_host(x->dx, 1, (int64_t)NC, (int64_t)NC, 0, 0, S->seed, 3, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(x->dwte0, 1, (int64_t)VtC, (int64_t)VtC, 0, 0, S->seed, 4, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(x->dwpe0, 1, (int64_t)TC, (int64_t)TC, 0, 0, S->seed, 5, PL_RNG_UNIFORM, -1, 1);
    /* ids spread over the vocabulary (every shard has rows to look up), the last one a
     * repeat of the first (its gradient rows add up) */
    int n = x->T * x->b, r0 = (int)(pl_rng_bits(S->seed, 6, 0) % (uint64_t)x->V);
    for (int i = 0; i < n; i++) x->tokens[i] = (r0 + i * (2 * x->V / n + 1)) % x->V;
    if (n > 1) x->tokens[n - 1] = x->tokens[0];
}

static void embed_run(drv_case *c) {
    embed_state *x = c->state;
    td_grid g;
    l8_kit_grid(&g, x->t, 1);
    l8_embed_in in = {x->wte, x->wpe, x->dx, x->dwte0, x->dwpe0, x->tokens};
    l8_play_embed(&g, &in, x->T, x->b, x->C, x->V, &x->out);
    l8_kit_grid_free(&g);
}

/* The whole embedding table: every tensor rank's private shard, once their seeds are
 * known (after the call). */
static float *whole_table(uint64_t mine, int t, int rows, int C, float sd) {
    uint64_t *seeds = calloc((size_t)pl_world(), sizeof *seeds);
    float *full = malloc((size_t)rows * C * sizeof(float));
    PL_CHECK(seeds && full, "out of host memory");
    drv_allgather_u64(mine, seeds);
    int dp0 = (pl_rank() / t) * t, per = rows / t; /* the kit's tensor group: t consecutive ranks */
    for (int r = 0; r < t; r++)
        pl_rng_fill_host(full + (size_t)r * per * C, 1, (int64_t)per * C, (int64_t)per * C, 0, 0, seeds[dp0 + r], 1,
                         PL_RNG_NORMAL, 0, sd);
    free(seeds);
    return full;
}

/* A group-by-group traffic check of a call that may talk on the tensor group only. */
static void check_tensor_traffic(drv_case *c, const char *what, const l8_tally got[L8_NGROUPS], double allreduces, double bytes) {
    l8_tally want[L8_NGROUPS];
    memset(want, 0, sizeof want);
    want[L8_TENSOR].calls[PL_OP_ALLREDUCE] = allreduces;
    want[L8_TENSOR].bytes = bytes;
    char why[400];
    bool bad = l8_traffic_diff(got, want, why, sizeof why) >= 0;
    if (drv_max(bad) > 0 && bad) drv_fail(c, "%s: %s", what, why);
    else if (drv_max(bad) > 0) drv_fail(c, "%s: wrong traffic on another rank", what);
}

static void embed_check(drv_case *c) {
    embed_state *x = c->state;
    int t = x->t, r = pl_rank() % t, Vt = x->V / t, C = x->C, N = x->T * x->b;
    size_t NC = (size_t)N * C, TC = (size_t)x->T * C;
    float *full = whole_table(x->private_seed, t, x->V, C, 0.5f);
    double *X = malloc(NC * sizeof *X), *dW = malloc((size_t)x->V * C * sizeof *dW), *dP = malloc(TC * sizeof *dP);
    PL_CHECK(X && dW && dP, "out of host memory");
    l8_embed_reference(X, dW, dP, full, x->wpe, x->tokens, x->dx, x->T, x->b, C, x->V);
    for (size_t i = 0; i < (size_t)Vt * C; i++) dW[i] = dW[(size_t)r * Vt * C + i] + x->dwte0[i];
    for (size_t i = 0; i < TC; i++) dP[i] += x->dwpe0[i];
    double tol = drv_tolerance();
    drv_check_error(c, "x = wte[tokens] + wpe after td_embed_forward", l8_rel_err(x->out.x, X, NC), tol);
    drv_check_error(c, "dwte (this rank's rows, accumulated) after td_embed_backward", l8_rel_err(x->out.dwte, dW, (size_t)Vt * C), tol);
    drv_check_error(c, "dwpe (accumulated) after td_embed_backward", l8_rel_err(x->out.dwpe, dP, TC), tol);
    if (drv_max(drv_failed(c)) == 0) {
        check_tensor_traffic(c, "td_embed_forward", x->out.tally[0], t > 1, t > 1 ? 4.0 * NC : 0);
        check_tensor_traffic(c, "td_embed_backward", x->out.tally[1], 0, 0);
    }
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "t=%d: x, dwte and dwpe as the whole-vocabulary lookup; %s forward, nothing backward", t,
                 t > 1 ? "one all-reduce of N*C floats" : "no collective");
    free(full), free(X), free(dW), free(dP);
}

static void embed_teardown(drv_case *c) {
    embed_state *x = c->state;
    free(x->wte), free(x->wpe), free(x->dx), free(x->dwte0), free(x->dwpe0), free(x->tokens);
    free(x->out.x), free(x->out.dwte), free(x->out.dwpe);
}

typedef struct {
    int t, N, V;
    float scale;
    uint64_t private_seed;
    float *logits;               /* this rank's columns [N, V/t] */
    int *targets;
    l8_xent_out out;
} xent_state;

static void xent_setup(drv_case *c) {
    const l8_state *S = state_of(c);
    xent_state *x = drv_state(c, sizeof *x);
    x->t = (int)c->arg[0], x->N = S->T * S->b, x->V = S->V, x->scale = 0.37f / (float)x->N;
    size_t n = (size_t)x->N * (x->V / x->t);
    x->private_seed = drv_case_seed(c);
    x->logits = malloc(n * sizeof(float)), x->targets = malloc((size_t)x->N * sizeof(int));
    x->out.dlogits = malloc(n * sizeof(float)), x->out.losses = malloc((size_t)x->N * sizeof(double));
    PL_CHECK(x->logits && x->targets && x->out.dlogits && x->out.losses, "out of host memory");
    pl_rng_fill_host(x->logits, 1, (int64_t)n, (int64_t)n, 0, 0, x->private_seed, 1, PL_RNG_NORMAL, 0, 3.0f);
    l8_ids(x->targets, (size_t)x->N, x->V, S->seed, 7);
}

static void xent_run(drv_case *c) {
    xent_state *x = c->state;
    td_grid g;
    l8_kit_grid(&g, x->t, 1);
    l8_play_xent(&g, x->logits, x->targets, x->N, x->V, x->scale, &x->out);
    l8_kit_grid_free(&g);
}

static void xent_check(drv_case *c) {
    xent_state *x = c->state;
    int t = x->t, r = pl_rank() % t, Vt = x->V / t, N = x->N;
    /* the whole logits: row i of rank q's shard is columns [q Vt, (q+1) Vt) of row i */
    float *shards = whole_table(x->private_seed, t, N * t, Vt, 3.0f), *full = malloc((size_t)N * x->V * sizeof(float));
    double *L = malloc((size_t)N * sizeof *L), *D = malloc((size_t)N * x->V * sizeof *D);
    PL_CHECK(full && L && D, "out of host memory");
    for (int q = 0; q < t; q++)
        for (int i = 0; i < N; i++) memcpy(full + (size_t)i * x->V + (size_t)q * Vt, shards + ((size_t)q * N + i) * Vt, (size_t)Vt * sizeof(float));
    l8_xent_reference(L, D, full, x->targets, N, x->V, x->scale);
    double num = 0, den = 0;
    for (int i = 0; i < N; i++) num += (x->out.losses[i] - L[i]) * (x->out.losses[i] - L[i]), den += L[i] * L[i];
    double loss_err = isfinite(num) ? sqrt(num / den) : INFINITY;
    for (int i = 0; i < N; i++) memmove(D + (size_t)i * Vt, D + (size_t)i * x->V + (size_t)r * Vt, (size_t)Vt * sizeof *D);
    double tol = drv_tolerance();
    drv_check_error(c, "losses after td_xent (whole-vocabulary softmax)", loss_err, tol);
    drv_check_error(c, "dlogits (this rank's columns) after td_xent", l8_rel_err(x->out.dlogits, D, (size_t)N * Vt), tol);
    if (drv_max(drv_failed(c)) == 0) check_tensor_traffic(c, "td_xent", x->out.tally, t > 1 ? 3 : 0, t > 1 ? 3.0 * 4 * N : 0);
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "t=%d: losses and dlogits as the whole-vocabulary softmax; %s", t,
                 t > 1 ? "three all-reduces of N floats, nothing gathered" : "no collective");
    free(shards), free(full), free(L), free(D);
}

static void xent_teardown(drv_case *c) {
    xent_state *x = c->state;
    free(x->logits), free(x->targets), free(x->out.dlogits), free(x->out.losses);
}

/* ==================================================================================== */
/* step.*, traffic.*                                                                      */
/* ==================================================================================== */

struct l8_run {
    bool done, failed_rc;
    td_config cfg;
    l8_layout lay;
    l8_step_out out;
    char rc_msg[200];
    double loss[L8_MAX_STEPS], ref_loss[L8_MAX_STEPS], ref_norm[L8_MAX_STEPS];
    double loss_err, norm_err, param_err;
    l8_tally want[L8_NGROUPS];
};

static void plan_steps(const drv_test *t, drv_plan *p) {
    l8_state *S = (l8_state *)t->data;
    for (int i = 0; i < S->ncfgs; i++)
        for (int j = 0; j < 2; j++) {
            const l8_tpd *k = &S->cfgs[i];
            drv_instance *in = drv_plan_add(p, &t[j], "%s.t%dp%dd%d", t[j].name, k->t, k->p, k->d);
            snprintf(in->group, sizeof in->group, "t%dp%dd%d", k->t, k->p, k->d);
            in->arg[0] = i;
        }
}
static void plan_none(const drv_test *t, drv_plan *p) { (void)t, (void)p; }

/* The replica's private seed: rank (tp 0, dp, pp 0)'s own, handed to the other tensor
 * ranks of the first stage through a group of the driver's own, so that no other stage
 * knows the tokens before the step (the last must receive activations to get a loss). */
static uint64_t replica_seed(drv_case *c, const l8_layout *lay) {
    uint64_t mine = drv_case_seed(c), seed = mine;
    pl_comm *first = pl_comm_split(pl_comm_world(), lay->first ? lay->dp : -1, lay->tp);
    if (first) {
        pl_host_bcast(&seed, sizeof seed, 0, first);
        pl_comm_free(first);
    }
    return lay->first ? seed : mine;
}

/* The referee's side of a run, after the player's: the serial run on the global batches
 * (the private seeds are public now), compared with what each rank holds and reported. */
static void judge(l8_state *S, l8_run *R, uint64_t mine) {
    const td_config *c = &R->cfg;
    int N = pl_world(), d = R->lay.d, m = c->micro, n = m * c->seq * c->batch;
    uint64_t *seeds = calloc((size_t)N, sizeof *seeds);
    int *tok = malloc((size_t)d * n * sizeof *tok), *tgt = malloc((size_t)d * n * sizeof *tgt);
    int *gtok = malloc((size_t)d * n * sizeof *gtok), *gtgt = malloc((size_t)d * n * sizeof *gtgt);
    const int *tp[TD_MAX_STAGES * 8], *gp[TD_MAX_STAGES * 8];
    PL_CHECK(seeds && tok && tgt && gtok && gtgt, "out of host memory");
    drv_allgather_u64(mine, seeds);
    l8_serial *M = l8_serial_new(c, S->seed);
    int steps = S->steps;
    for (int k = 0; k < steps; k++) {
        for (int q = 0; q < d; q++) {
            l8_step_tokens(tok + (size_t)q * n, c, seeds[l8_rank_of(0, q, 0, c->t, d)], k);
            l8_step_targets(tgt + (size_t)q * n, c, S->seed, q, k);
            tp[q] = tok + (size_t)q * n, gp[q] = tgt + (size_t)q * n;
        }
        l8_to_global(gtok, tp, d, m, c->seq, c->batch);
        l8_to_global(gtgt, gp, d, m, c->seq, c->batch);
        l8_serial_step(M, gtok, gtgt, d * m * c->batch, &R->ref_loss[k], &R->ref_norm[k]);
    }
    float *want = malloc(R->lay.count * sizeof *want);
    double *wd = malloc(R->lay.count * sizeof *wd);
    PL_CHECK(want && wd, "out of host memory");
    l8_serial_slice(M, &R->lay, want);
    for (size_t i = 0; i < R->lay.count; i++) wd[i] = want[i];
    R->param_err = l8_rel_err(R->out.params, wd, R->lay.count);
    /* the replicas' losses live on the last stage; tensor rank 0 speaks for each */
    R->loss_err = R->norm_err = 0;
    for (int k = 0; k < steps; k++) {
        double mine_loss = R->lay.last && R->lay.tp == 0 ? R->out.loss[k] : 0;
        R->loss[k] = drv_sum(isfinite(mine_loss) ? mine_loss : 1e30) / d;
        double le = fabs(R->loss[k] - R->ref_loss[k]) / fabs(R->ref_loss[k]);
        double ne = isfinite(R->out.norm[k]) ? fabs(R->out.norm[k] - R->ref_norm[k]) / R->ref_norm[k] : INFINITY;
        if (!(le <= R->loss_err)) R->loss_err = le;
        if (!(ne <= R->norm_err)) R->norm_err = ne;
    }
    l8_expected_traffic(c, &R->lay, N, R->want);
    l8_serial_free(M);
    free(seeds), free(tok), free(tgt), free(gtok), free(gtgt), free(want), free(wd);
}

static void step_run(drv_case *c) {
    l8_state *S = state_of(c);
    int i = (int)c->arg[0];
    if (!S->runs[i]) {
        S->runs[i] = calloc(1, sizeof *S->runs[i]);
        PL_CHECK(S->runs[i] != NULL, "out of host memory");
    }
    l8_run *R = S->runs[i];
    if (R->done) return;
    R->done = true;
    const l8_tpd *k = &S->cfgs[i];
    R->cfg = l8_config(S, k->t, k->p);
    l8_layout_make(&R->lay, &R->cfg, pl_world(), pl_rank());
    /* the referee's inputs: this rank's parameters and its stage's ids, step by step */
    float *params0 = malloc(R->lay.count * sizeof *params0);
    R->out.params = malloc(R->lay.count * sizeof(float));
    size_t n = (size_t)R->cfg.micro * R->cfg.seq * R->cfg.batch;
    int *ids = malloc(2 * (size_t)S->steps * n * sizeof *ids);
    PL_CHECK(params0 && R->out.params && ids, "out of host memory");
    l8_initial_params(params0, &R->lay, &R->cfg, S->seed);
    uint64_t seed = replica_seed(c, &R->lay);
    const int *tok[L8_MAX_STEPS], *tgt[L8_MAX_STEPS];
    for (int s = 0; s < S->steps; s++) {
        int *a = ids + (size_t)s * n, *b = ids + (size_t)(S->steps + s) * n;
        l8_step_tokens(a, &R->cfg, seed, s);
        l8_step_targets(b, &R->cfg, S->seed, R->lay.dp, s);
        tok[s] = a, tgt[s] = b;
    }
    /* the player */
    td_grid g;
    l8_kit_grid(&g, k->t, k->p);
    l8_play_steps(&g, &R->cfg, &R->lay, params0, R->lay.first ? tok : NULL, R->lay.last ? tgt : NULL, S->steps, &R->out);
    l8_kit_grid_free(&g);
    R->failed_rc = drv_max(R->out.rc != TD_OK) > 0;
    if (R->out.rc != TD_OK) snprintf(R->rc_msg, sizeof R->rc_msg, "td_train_step returned %d (%s)", R->out.rc, td_error_string(R->out.rc));
    else snprintf(R->rc_msg, sizeof R->rc_msg, "td_train_step failed on another rank");
    /* the referee again: the tokens' seeds are no secret any more */
    if (!R->failed_rc) judge(S, R, seed);
    free(params0), free(ids);
}

static const l8_run *run_of(const drv_case *c) { return state_of(c)->runs[c->arg[0]]; }

static void step_check(drv_case *c) {
    const l8_run *R = run_of(c);
    if (R->failed_rc) {
        drv_fail(c, "%s", R->rc_msg);
        return;
    }
    double tol = drv_tolerance();
    char what[200];
    snprintf(what, sizeof what, "loss (mean over the replicas' micro-batches) vs the serial loss of the global batch: step 1 %.6f vs %.6f",
             R->loss[0], R->ref_loss[0]);
    drv_check_error(c, what, R->loss_err, tol);
    snprintf(what, sizeof what, "global gradient norm (each parameter once) vs the serial run's: step 1 %.6f vs %.6f", R->out.norm[0],
             R->ref_norm[0]);
    drv_check_error(c, what, R->norm_err, tol);
    snprintf(what, sizeof what, "parameters after %d steps (clipping, AdamW, ZeRO-1) vs the serial run's slice", state_of(c)->steps);
    drv_check_error(c, what, R->param_err, tol);
    drv_num(c, "loss", R->loss[state_of(c)->steps - 1]);
    drv_num(c, "grad_norm", R->ref_norm[0]);
    drv_num(c, "time_us", 1e6 * R->out.seconds[0]);
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "%d steps, m=%d: losses %.6f..%.6f, norms %.4f..%.4f (clip %.2f) as the single-rank run's; parameters within "
                    "%.1e (tolerance %.0e)",
                 state_of(c)->steps, R->cfg.micro, R->loss[0], R->loss[state_of(c)->steps - 1], R->ref_norm[0],
                 R->ref_norm[state_of(c)->steps - 1], R->cfg.max_norm, drv_max(R->param_err), tol);
}

static void traffic_check(drv_case *c) {
    const l8_run *R = run_of(c);
    if (R->failed_rc) {
        drv_fail(c, "%s", R->rc_msg);
        return;
    }
    if (drv_max(R->out.counters_differ) > 0)
        drv_forbid(c, "the counted traffic differs from what went to the comm backend (instrumentation tampered with?)");
    char why[400];
    bool bad = l8_traffic_diff(R->out.tally, R->want, why, sizeof why) >= 0;
    double any = drv_max(bad);
    if (bad) drv_fail(c, "step 1 on rank %d (tp %d, dp %d, pp %d): %s", pl_rank(), R->lay.tp, R->lay.dp, R->lay.pp, why);
    else if (any > 0) drv_fail(c, "step 1: another rank's traffic differs from the formulas");
    double bytes = R->out.tally[L8_TENSOR].bytes + R->out.tally[L8_DATA].bytes + R->out.tally[L8_EMBED].bytes +
                   R->out.tally[L8_PIPE].msg_bytes;
    drv_num(c, "bytes_per_rank", drv_max(bytes));
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "every group's collectives and messages as the formulas (busiest rank: %.0f bytes; tensor %.0f all-reduces, "
                    "pipeline %.0f messages, data %.0f + %.0f)",
                 drv_max(bytes), drv_max(R->want[L8_TENSOR].calls[PL_OP_ALLREDUCE]), drv_max(R->want[L8_PIPE].msgs),
                 drv_max(R->want[L8_DATA].calls[PL_OP_REDUCE_SCATTER]), drv_max(R->want[L8_DATA].calls[PL_OP_ALLGATHER]));
}

/* ==================================================================================== */
/* The table                                                                              */
/* ==================================================================================== */

static const drv_test TESTS[] = {
    {"config.errors", "config", NULL, config_setup, config_run, config_check, NULL, NULL, NULL, &g_state},
    {"grid", "grid", plan_grid, NULL, grid_run, grid_check, NULL, NULL, NULL, &g_state},
    {"grid.errors", "grid_errors", NULL, NULL, grid_errors_run, grid_errors_check, NULL, NULL, NULL, &g_state},
    {"embed", "embed", plan_tensor, embed_setup, embed_run, embed_check, NULL, NULL, embed_teardown, &g_state},
    {"xent", "xent", plan_tensor, xent_setup, xent_run, xent_check, NULL, NULL, xent_teardown, &g_state},
    /* these two rows are planned together by the first (plan_steps) */
    {"step", NULL, plan_steps, NULL, step_run, step_check, NULL, NULL, NULL, &g_state},
    {"traffic", NULL, plan_none, NULL, step_run, traffic_check, NULL, NULL, NULL, &g_state},
    {NULL},
};

static void lab8_init(void) {
    l8_state *S = &g_state;
    S->seed = pl_info()->seed;
    if (S->C % S->H) pl_usage_error("--hidden %d is not a multiple of --heads %d", S->C, S->H);
    if (S->steps > L8_MAX_STEPS) pl_usage_error("--steps %d: at most %d", S->steps, L8_MAX_STEPS);
    if (!l8_model_known(S->model))
        pl_usage_error("--model %s: not a row of Table 1 (1.7B 3.6B 7.5B 18.4B 39.1B 76.1B 145.6B 310.1B 529.6B 1T), 'tiny' or 'all'",
                       S->model);
    step_configs(S, pl_world());
    drv_print("# lab08: %d rank(s), device %s; GPT T=%d b=%d C=%d H=%d F=%d V=%d L=%d, tied embedding; %d steps of AdamW "
              "(lr %g) clipped to norm %g; m = p + 1 micro-batches per replica\n",
              pl_world(), pl_device_name(pl_info()->device), S->T, S->b, S->C, S->H, S->F, S->V, S->L, S->steps, S->lr, S->clip);
}

static void lab8_finish(void) {
    for (int i = 0; i < g_state.ncfgs; i++)
        if (g_state.runs[i]) {
            l8_layout_free(&g_state.runs[i]->lay);
            free(g_state.runs[i]->out.params);
            free(g_state.runs[i]);
            g_state.runs[i] = NULL;
        }
}

static int mode_plan(void) { return l8_mode_plan(&g_state); }
static int mode_bench(void) { return l8_mode_bench(&g_state); }

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_state.T, 1, 1024, "T: positions per sequence (default 8)"},
    {"--batch", DRV_INT, &g_state.b, 1, 1024, "b: sequences per micro-batch (default 2)"},
    {"--hidden", DRV_INT, &g_state.C, 1, 8192, "C (default 32)"},
    {"--heads", DRV_INT, &g_state.H, 1, 256, "H, dividing C (default 8)"},
    {"--ffn", DRV_INT, &g_state.F, 1, 32768, "F: MLP width (default 64)"},
    {"--vocab", DRV_INT, &g_state.V, 2, 65536, "V (default 64)"},
    {"--layers", DRV_INT, &g_state.L, 1, TD_MAX_STAGES, "L blocks (default 8)"},
    {"--steps", DRV_INT, &g_state.steps, 1, L8_MAX_STEPS, "training steps of each graded run (default 2)"},
    {"--lr", DRV_DOUBLE, &g_state.lr, 1e-6, 10, "AdamW learning rate (default 0.01)"},
    {"--clip", DRV_DOUBLE, &g_state.clip, 1e-6, 1e6, "max_norm of the gradient clipping (default 0.25)"},
    {"--profile", DRV_STR, &g_state.profile, 0, 0, "--run plan: NAME|FILE of the machine (default dgx-a100)"},
    {"--model", DRV_STR, &g_state.model, 0, 0, "--run plan: a Table 1 row (1.7B .. 1T), 'tiny' (these flags' GPT) or 'all' (default)"},
    {"--gpus", DRV_INT, &g_state.gpus, 0, 1 << 20, "--run plan: GPUs (default: the row's, or the whole profile)"},
    {"--global-batch", DRV_INT, &g_state.gbatch, 0, 1 << 24, "--run plan: sequences per iteration (default: the row's)"},
    {"--top", DRV_INT, &g_state.top, 1, 1000, "--run plan: configurations listed (default 8)"},
    {"--bench-steps", DRV_INT, &g_state.bench_steps, 1, 1000, "--run bench: measured steps of the tiny GPT (default 5)"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"plan", "the planner: the best (t, p, d, v, micro-batch, recompute, ZeRO-1) for a model, batch and machine", mode_plan, "1", NULL},
    {"bench", "Table 1 of the Megatron-LM paper predicted on dgx-a100 (ratio lines), the tiny GPT measured vs predicted (make bench LAB=8)",
     mode_bench, "2", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "08-3d",
    .title = "Lab 8: 3D parallelism (tensor x pipeline x data) and a planner",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab8_init,
    .finish = lab8_finish,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
