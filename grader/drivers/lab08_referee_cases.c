/* lab08_referee_cases.c - the referee's callbacks of every Lab 8 case: setup puts the
 * inputs (host arrays it made) into the case's slots, check compares what the player left
 * there with the rule or the reference and gives the verdict. No device memory, no call to
 * the student's code; the only communication is between referees (reductions of verdicts,
 * the seeds made public after a call, a replica's private seed to its own first stage). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"
#include "pl_instrument.h" // defines: pl_host_bcast

/* ==================================================================================== */
/* Which cases run                                                                        */
/* ==================================================================================== */

void l8_step_configs(l8_state *S, int N) {
    static const l8_tpd LIST[] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 1}, {2, 1, 2}, {1, 2, 2},
                                  {2, 2, 2}, {4, 2, 1}, {1, 4, 2}, {8, 1, 1}, {1, 8, 1}, {1, 1, 8}};
    S->ncfgs = 0;
    for (size_t i = 0; i < sizeof LIST / sizeof LIST[0]; i++)
        if (LIST[i].t * LIST[i].p * LIST[i].d == N && S->ncfgs < L8_MAX_CONFIGS) S->cfgs[S->ncfgs++] = LIST[i];
    if (S->ncfgs) return;
    /* a world the list does not cover: each axis alone, where the model allows it */
    l8_tpd more[3] = {{N, 1, 1}, {1, N, 1}, {1, 1, N}};
    for (int i = 0; i < 3; i++) {
        td_config c = l8_config(S, more[i].t, more[i].p);
        if (c.heads % c.t == 0 && c.ffn % c.t == 0 && c.vocab % c.t == 0 && c.p <= c.layers) S->cfgs[S->ncfgs++] = more[i];
    }
}

int l8_tensor_size(const l8_state *S, int N) {
    int t = N;
    while (t > 1 && (N % t || S->V % t)) t--;
    return t;
}

/* ==================================================================================== */
/* config.errors                                                                          */
/* ==================================================================================== */

void l8_config_setup(drv_case *c) {
    l8_config_slots *x = drv_state(c, sizeof *x);
    x->n = l8_config_cases(l8_state_of(c), x->cases, 32);
}

void l8_config_check(drv_case *c) {
    l8_config_slots *x = c->state;
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

static void list(char *out, size_t len, const int *v, int n) {
    int w = snprintf(out, len, "[");
    for (int i = 0; i < n && w < (int)len; i++) w += snprintf(out + w, len - (size_t)w, "%s%d", i ? "," : "", v[i]);
    if (w < (int)len) snprintf(out + w, len - (size_t)w, "]");
}

void l8_grid_check(drv_case *c) {
    const l8_grid_out *x = c->state;
    int t = (int)c->arg[0], p = (int)c->arg[1], N = c->world, d = N / (t * p), rank = c->rank;
    if (!drv_all_ok(c, x->rc, "td_grid_build", td_error_string)) return;
    int tp, dp, pp;
    l8_coords(rank, t, d, &tp, &dp, &pp);
    if (x->t != t || x->p != p || x->d != d || x->tp != tp || x->dp != dp || x->pp != pp)
        drv_fail(c, "t=%d p=%d d=%d: rank %d's grid says sizes %d,%d,%d and (tp, dp, pp) = (%d, %d, %d); the rule gives (%d, %d, %d)",
                 t, p, d, rank, x->t, x->p, x->d, x->tp, x->dp, x->pp, tp, dp, pp);
    const int groups[4] = {L8_TENSOR, L8_DATA, L8_PIPE, L8_EMBED};
    for (int i = 0; i < 4 && !drv_failed(c); i++) {
        int want[TD_MAX_STAGES * 8], g = groups[i], n = l8_members(rank, t, p, d, g, want);
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

void l8_grid_errors_setup(drv_case *c) {
    l8_grid_err_slots *x = drv_state(c, sizeof *x);
    int N = c->world, bad[5][2] = {{0, 1}, {1, 0}, {N + 1, 1}, {1, 2 * N}, {3, 1}};
    x->n = N % 3 && N > 1 ? 5 : 4;
    for (int i = 0; i < x->n; i++) x->t[i] = bad[i][0], x->p[i] = bad[i][1];
}

void l8_grid_errors_check(drv_case *c) {
    l8_grid_err_slots *x = c->state;
    for (int i = 0; i < x->n && !drv_failed(c); i++) {
        if (x->rc[i] != TD_ERR_WORLD)
            drv_fail(c, "td_grid_build(t %d, p %d on %d rank(s)) returned %d (%s), expected TD_ERR_WORLD", x->t[i], x->p[i], c->world,
                     x->rc[i], td_error_string(x->rc[i]));
        else if (x->touched[i])
            drv_fail(c, "td_grid_build(t %d, p %d on %d rank(s)) returned TD_ERR_WORLD but wrote into the grid", x->t[i], x->p[i], c->world);
    }
    if (drv_max(drv_failed(c)) == 0) drv_note(c, "%d bad grids: TD_ERR_WORLD on every rank, the grid untouched", x->n);
}

/* ==================================================================================== */
/* embed.*, xent.*                                                                        */
/* ==================================================================================== */

static float *host_floats(size_t n) {
    float *p = malloc((n + 1) * sizeof *p);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

static void fill(float *dst, size_t n, uint64_t seed, uint64_t id, pl_rng_dist dist, float lo, float hi) {
    pl_rng_fill_host(dst, 1, (int64_t)n, (int64_t)n, 0, 0, seed, id, dist, lo, hi);
}

void l8_embed_setup(drv_case *c) {
    const l8_state *S = l8_state_of(c);
    l8_embed_slots *x = drv_state(c, sizeof *x);
    x->t = (int)c->arg[0], x->T = S->T, x->b = S->b, x->C = S->C, x->V = S->V;
    size_t NC = (size_t)x->T * x->b * x->C, VtC = (size_t)(x->V / x->t) * x->C, TC = (size_t)x->T * x->C;
    int n = x->T * x->b;
    x->private_seed = drv_case_seed(c);
    float *wte = host_floats(VtC), *wpe = host_floats(TC), *dx = host_floats(NC), *dwte0 = host_floats(VtC), *dwpe0 = host_floats(TC);
    int *tokens = malloc((size_t)n * sizeof *tokens);
    PL_CHECK(tokens != NULL, "out of host memory");
    fill(wte, VtC, x->private_seed, 1, PL_RNG_NORMAL, 0, 0.5f);
    fill(wpe, TC, S->seed, 2, PL_RNG_NORMAL, 0, 0.5f);
    fill(dx, NC, S->seed, 3, PL_RNG_UNIFORM, -1, 1);
    fill(dwte0, VtC, S->seed, 4, PL_RNG_UNIFORM, -1, 1);
    fill(dwpe0, TC, S->seed, 5, PL_RNG_UNIFORM, -1, 1);
    /* ids spread over the vocabulary (every shard has rows to look up), the last one a
     * repeat of the first (its gradient rows add up) */
    int r0 = (int)(pl_rng_bits(S->seed, 6, 0) % (uint64_t)x->V);
    for (int i = 0; i < n; i++) tokens[i] = (r0 + i * (2 * x->V / n + 1)) % x->V;
    if (n > 1) tokens[n - 1] = tokens[0];
    x->in = (l8_embed_in){wte, wpe, dx, dwte0, dwpe0, tokens};
    x->out.x = host_floats(NC), x->out.dwte = host_floats(VtC), x->out.dwpe = host_floats(TC);
}

/* The whole table: every tensor rank's private shard, once their seeds are made public
 * (after the call). The kit's tensor groups are t consecutive ranks. */
static float *whole_table(const drv_case *c, uint64_t mine, int t, int rows, int cols, float sd) {
    uint64_t *seeds = calloc((size_t)c->world, sizeof *seeds);
    float *full = host_floats((size_t)rows * cols);
    PL_CHECK(seeds != NULL, "out of host memory");
    drv_allgather_u64(mine, seeds);
    int first = (c->rank / t) * t, per = rows / t;
    for (int r = 0; r < t; r++) fill(full + (size_t)r * per * cols, (size_t)per * cols, seeds[first + r], 1, PL_RNG_NORMAL, 0, sd);
    free(seeds);
    return full;
}

/* A call that may talk on the tensor group only, and exactly so. */
static void check_tensor_traffic(drv_case *c, const char *what, const l8_tally got[L8_NGROUPS], double allreduces, double bytes) {
    l8_tally want[L8_NGROUPS];
    memset(want, 0, sizeof want);
    want[L8_TENSOR].calls[PL_OP_ALLREDUCE] = allreduces;
    want[L8_TENSOR].bytes = bytes;
    char why[400];
    bool bad = l8_traffic_diff(got, want, why, sizeof why) >= 0;
    double anywhere = drv_max(bad);
    if (bad) drv_fail(c, "%s: %s", what, why);
    else if (anywhere > 0) drv_fail(c, "%s: wrong traffic on another rank", what);
}

void l8_embed_check(drv_case *c) {
    l8_embed_slots *x = c->state;
    int t = x->t, r = c->rank % t, Vt = x->V / t, C = x->C, N = x->T * x->b;
    size_t NC = (size_t)N * C, TC = (size_t)x->T * C;
    float *full = whole_table(c, x->private_seed, t, x->V, C, 0.5f);
    double *X = malloc(NC * sizeof *X), *dW = malloc((size_t)x->V * C * sizeof *dW), *dP = malloc(TC * sizeof *dP);
    PL_CHECK(X && dW && dP, "out of host memory");
    l8_embed_reference(X, dW, dP, full, x->in.wpe, x->in.tokens, x->in.dx, x->T, x->b, C, x->V);
    for (size_t i = 0; i < (size_t)Vt * C; i++) dW[i] = dW[(size_t)r * Vt * C + i] + x->in.dwte0[i];
    for (size_t i = 0; i < TC; i++) dP[i] += x->in.dwpe0[i];
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

void l8_embed_teardown(drv_case *c) {
    l8_embed_slots *x = c->state;
    free((void *)x->in.wte), free((void *)x->in.wpe), free((void *)x->in.dx), free((void *)x->in.dwte0);
    free((void *)x->in.dwpe0), free((void *)x->in.tokens);
    free(x->out.x), free(x->out.dwte), free(x->out.dwpe);
}

void l8_xent_setup(drv_case *c) {
    const l8_state *S = l8_state_of(c);
    l8_xent_slots *x = drv_state(c, sizeof *x);
    x->t = (int)c->arg[0], x->N = S->T * S->b, x->V = S->V, x->scale = 0.37f / (float)x->N;
    size_t n = (size_t)x->N * (x->V / x->t);
    x->private_seed = drv_case_seed(c);
    x->logits = host_floats(n), x->targets = malloc((size_t)x->N * sizeof(int));
    x->out.dlogits = host_floats(n), x->out.losses = malloc((size_t)x->N * sizeof(double));
    PL_CHECK(x->targets && x->out.losses, "out of host memory");
    fill(x->logits, n, x->private_seed, 1, PL_RNG_NORMAL, 0, 3.0f);
    l8_ids(x->targets, (size_t)x->N, x->V, S->seed, 7);
}

void l8_xent_check(drv_case *c) {
    l8_xent_slots *x = c->state;
    int t = x->t, r = c->rank % t, Vt = x->V / t, N = x->N;
    /* rank q's shard [N, Vt] holds columns [q Vt, (q+1) Vt) of every row */
    float *shards = whole_table(c, x->private_seed, t, N * t, Vt, 3.0f), *full = host_floats((size_t)N * x->V);
    double *L = malloc((size_t)N * sizeof *L), *D = malloc((size_t)N * x->V * sizeof *D);
    PL_CHECK(L && D, "out of host memory");
    for (int q = 0; q < t; q++)
        for (int i = 0; i < N; i++)
            memcpy(full + (size_t)i * x->V + (size_t)q * Vt, shards + ((size_t)q * N + i) * Vt, (size_t)Vt * sizeof(float));
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

void l8_xent_teardown(drv_case *c) {
    l8_xent_slots *x = c->state;
    free(x->logits), free(x->targets), free(x->out.dlogits), free(x->out.losses);
}

/* ==================================================================================== */
/* step.*, traffic.*                                                                      */
/* ==================================================================================== */

/* The replica's private seed: rank (tp 0, dp, pp 0)'s own, handed to the other tensor
 * ranks of the first stage through a group of the referees' own, so that no other stage
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

void l8_step_setup(drv_case *c) {
    l8_state *S = l8_state_of(c);
    int i = (int)c->arg[0];
    if (!S->runs[i]) {
        S->runs[i] = calloc(1, sizeof *S->runs[i]);
        PL_CHECK(S->runs[i] != NULL, "out of host memory");
    }
    l8_run *R = S->runs[i];
    if (R->prepared) return;
    R->prepared = true;
    const l8_tpd *k = &S->cfgs[i];
    R->cfg = l8_config(S, k->t, k->p);
    l8_layout_make(&R->lay, &R->cfg, c->world, c->rank);
    size_t n = (size_t)R->cfg.micro * R->cfg.seq * R->cfg.batch;
    R->params0 = host_floats(R->lay.count);
    R->out.params = host_floats(R->lay.count);
    R->ids = malloc(2 * (size_t)S->steps * n * sizeof *R->ids);
    PL_CHECK(R->ids != NULL, "out of host memory");
    l8_initial_params(R->params0, &R->lay, &R->cfg, S->seed);
    R->replica_seed = replica_seed(c, &R->lay);
    memset(R->ids, 0, 2 * (size_t)S->steps * n * sizeof *R->ids);
    for (int s = 0; s < S->steps; s++) { /* a stage gets only what it uses */
        if (R->lay.first) l8_step_tokens(R->ids + (size_t)s * n, &R->cfg, R->replica_seed, s);
        if (R->lay.last) l8_step_targets(R->ids + (size_t)(S->steps + s) * n, &R->cfg, S->seed, R->lay.dp, s);
    }
}

/* After the play: the serial run on the global batches (the replicas' seeds are public
 * now), compared with what each rank holds and reported. */
static void judge(drv_case *c, l8_state *S, l8_run *R) {
    const td_config *cf = &R->cfg;
    R->judged = true;
    R->failed_rc = drv_max(R->out.rc != TD_OK) > 0;
    if (R->out.rc != TD_OK) snprintf(R->rc_msg, sizeof R->rc_msg, "td_train_step returned %d (%s)", R->out.rc, td_error_string(R->out.rc));
    else snprintf(R->rc_msg, sizeof R->rc_msg, "td_train_step failed on another rank");
    if (R->failed_rc) return;
    int N = c->world, d = R->lay.d, m = cf->micro, n = m * cf->seq * cf->batch;
    uint64_t *seeds = calloc((size_t)N, sizeof *seeds);
    int *tok = malloc((size_t)d * n * sizeof *tok), *tgt = malloc((size_t)d * n * sizeof *tgt);
    int *gtok = malloc((size_t)d * n * sizeof *gtok), *gtgt = malloc((size_t)d * n * sizeof *gtgt);
    const int *tp[TD_MAX_STAGES * 8], *gp[TD_MAX_STAGES * 8];
    PL_CHECK(seeds && tok && tgt && gtok && gtgt, "out of host memory");
    drv_allgather_u64(R->replica_seed, seeds);
    l8_serial *M = l8_serial_new(cf, S->seed);
    for (int k = 0; k < S->steps; k++) {
        for (int q = 0; q < d; q++) {
            l8_step_tokens(tok + (size_t)q * n, cf, seeds[l8_rank_of(0, q, 0, cf->t, d)], k);
            l8_step_targets(tgt + (size_t)q * n, cf, S->seed, q, k);
            tp[q] = tok + (size_t)q * n, gp[q] = tgt + (size_t)q * n;
        }
        l8_to_global(gtok, tp, d, m, cf->seq, cf->batch);
        l8_to_global(gtgt, gp, d, m, cf->seq, cf->batch);
        l8_serial_step(M, gtok, gtgt, d * m * cf->batch, &R->ref_loss[k], &R->ref_norm[k]);
    }
    float *want = host_floats(R->lay.count);
    double *wd = malloc(R->lay.count * sizeof *wd);
    PL_CHECK(wd != NULL, "out of host memory");
    l8_serial_slice(M, &R->lay, want);
    for (size_t i = 0; i < R->lay.count; i++) wd[i] = want[i];
    R->param_err = l8_rel_err(R->out.params, wd, R->lay.count);
    /* the replicas' losses live on the last stage; tensor rank 0 speaks for each */
    R->loss_err = R->norm_err = 0;
    for (int k = 0; k < S->steps; k++) {
        double mine = R->lay.last && R->lay.tp == 0 ? R->out.loss[k] : 0;
        R->loss[k] = drv_sum(isfinite(mine) ? mine : 1e30) / d;
        double le = fabs(R->loss[k] - R->ref_loss[k]) / fabs(R->ref_loss[k]);
        double ne = isfinite(R->out.norm[k]) ? fabs(R->out.norm[k] - R->ref_norm[k]) / R->ref_norm[k] : INFINITY;
        if (!(le <= R->loss_err)) R->loss_err = le;
        if (!(ne <= R->norm_err)) R->norm_err = ne;
    }
    l8_expected_traffic(cf, &R->lay, N, R->want);
    l8_serial_free(M);
    free(seeds), free(tok), free(tgt), free(gtok), free(gtgt), free(want), free(wd);
}

static l8_run *judged_run(drv_case *c) {
    l8_state *S = l8_state_of(c);
    l8_run *R = S->runs[c->arg[0]];
    if (!R->judged) judge(c, S, R);
    return R;
}

void l8_step_check(drv_case *c) {
    const l8_run *R = judged_run(c);
    int steps = l8_state_of(c)->steps;
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
    snprintf(what, sizeof what, "parameters after %d steps (clipping, AdamW, ZeRO-1) vs the serial run's slice", steps);
    drv_check_error(c, what, R->param_err, tol);
    drv_num(c, "loss", R->loss[steps - 1]);
    drv_num(c, "grad_norm", R->ref_norm[0]);
    drv_num(c, "time_us", 1e6 * R->out.seconds[0]);
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "%d steps, m=%d: losses %.6f..%.6f, norms %.4f..%.4f (clip %.2f) as the single-rank run's; parameters within "
                    "%.1e (tolerance %.0e)",
                 steps, R->cfg.micro, R->loss[0], R->loss[steps - 1], R->ref_norm[0], R->ref_norm[steps - 1], R->cfg.max_norm,
                 drv_max(R->param_err), tol);
}

void l8_traffic_check(drv_case *c) {
    const l8_run *R = judged_run(c);
    if (R->failed_rc) {
        drv_fail(c, "%s", R->rc_msg);
        return;
    }
    if (drv_max(R->out.counters_differ) > 0)
        drv_forbid(c, "the counted traffic differs from what went to the comm backend (instrumentation tampered with?)");
    char why[400];
    bool bad = l8_traffic_diff(R->out.tally, R->want, why, sizeof why) >= 0;
    double anywhere = drv_max(bad);
    if (bad) drv_fail(c, "step 1 on rank %d (tp %d, dp %d, pp %d): %s", c->rank, R->lay.tp, R->lay.dp, R->lay.pp, why);
    else if (anywhere > 0) drv_fail(c, "step 1: another rank's traffic differs from the formulas");
    const l8_tally *g = R->out.tally;
    double bytes = drv_max(g[L8_TENSOR].bytes + g[L8_DATA].bytes + g[L8_EMBED].bytes + g[L8_WORLD].bytes + g[L8_PIPE].msg_bytes);
    drv_num(c, "bytes_per_rank", bytes);
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "every group's collectives and messages as the formulas (busiest rank: %.0f bytes; tensor %.0f all-reduces, "
                    "pipeline %.0f messages, data %.0f + %.0f)",
                 bytes, drv_max(R->want[L8_TENSOR].calls[PL_OP_ALLREDUCE]), drv_max(R->want[L8_PIPE].msgs),
                 drv_max(R->want[L8_DATA].calls[PL_OP_REDUCE_SCATTER]), drv_max(R->want[L8_DATA].calls[PL_OP_ALLGATHER]));
}

void l8_runs_free(l8_state *S) {
    for (int i = 0; i < L8_MAX_CONFIGS; i++)
        if (S->runs[i]) {
            l8_layout_free(&S->runs[i]->lay);
            free(S->runs[i]->out.params), free(S->runs[i]->params0), free(S->runs[i]->ids);
            free(S->runs[i]);
            S->runs[i] = NULL;
        }
}
