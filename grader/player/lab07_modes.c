/* lab07_modes.c (player) - Lab 7's modes, on the student's stages beside the kit's own DDP
 * (a mode is the student's own program: it runs without a referee):
 *   --run train   (make lab-7 RUN=train)   a tiny GPT learns a text byte by byte with DDP and
 *                 with each ZeRO stage from the same start; every curve must equal DDP's;
 *                 scripts/plot-train-7.sh plots them
 *   --run memory  (make lab-7 RUN=memory)  bytes per rank of each category for DDP and each
 *                 stage, measured and by formula, fp32 and bf16; the formula for GPT-3 175B
 *                 and Llama-3-70B with the smallest N that fits an 80 GB GPU;
 *                 scripts/plot-memory-7.sh plots bytes per rank against N
 *   --run bench   (make bench LAB=7)       step time of DDP and each stage measured here and
 *                 the step replayed on the dgx-h100 profile
 * The kit's DDP: full parameters, gradients and AdamW state on every rank, one all-reduce
 * per unit on the comm stream as soon as its backward is issued (Lab 6's overlap). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_play.h"

/* What a mode knows: the flags, the world, the seed of its initial weights. */
typedef struct {
    const l7_flags *f;
    pl_comm *world;
    int rank, np;
    uint64_t seed;
    plc_profile prof;
    bool have_prof;
} mode_ctx;

static mode_ctx context(void) {
    mode_ctx x = {.f = l7_opts(), .world = pl_comm_world(), .rank = pl_rank(), .np = pl_world(), .seed = pl_info()->seed};
    return x;
}

/* The model of a mode in zero.h's types. */
static void describe(zero_model *m, const gpt_config *mc, int layers) {
    l7_model *lm = malloc(sizeof *lm);
    PL_CHECK(lm != NULL, "out of host memory");
    l7_describe(lm, mc, layers);
    l7_zero_model(m, lm);
    free(lm);
}

/* ==================================================================================== */
/* The kit's DDP                                                                         */
/* ==================================================================================== */

typedef struct {
    const zero_model *m;
    zero_config cfg;
    pl_comm *comm;
    int step;
    size_t uoff[ZERO_MAX_UNITS], es;
    void *params, *grads;  /* [Ψ] param dtype */
    float *master, *mom;   /* [Ψ] fp32 (bf16 runs), [2Ψ] fp32 */
    float *norm;
    pl_event *ready, *done;
} ddp;

static void ddp_init(ddp *d, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    memset(d, 0, sizeof *d);
    d->m = m, d->cfg = *cfg, d->comm = comm, d->es = cfg->param_dtype == ZERO_BF16 ? 2 : 4;
    size_t at = 0;
    for (int u = 0; u < m->nunits; u++) d->uoff[u] = at, at += m->unit[u].numel;
    d->params = pl_malloc_tagged(at * d->es, PL_MEM_PARAMS);
    d->grads = pl_malloc_tagged(at * d->es, PL_MEM_GRADS);
    d->mom = pl_malloc_tagged(2 * at * 4, PL_MEM_OPTIM);
    pl_fill(d->mom, 0.0f, 2 * at, NULL);
    if (d->es == 2) d->master = pl_malloc_tagged(at * 4, PL_MEM_OPTIM);
    for (int u = 0; u < m->nunits; u++) {
        size_t n = m->unit[u].numel;
        if (d->es == 2) {
            pl_copy(d->master + d->uoff[u], init[u], n * 4, NULL);
            kern_bf16_from_f32((uint16_t *)d->params + d->uoff[u], init[u], n, NULL);
        } else {
            pl_copy((float *)d->params + d->uoff[u], init[u], n * 4, NULL);
        }
    }
    d->norm = pl_malloc_floats(2);
    d->ready = pl_event_create(), d->done = pl_event_create();
    pl_device_sync();
}

static void ddp_free(ddp *d) {
    pl_device_sync();
    void *b[] = {d->params, d->grads, d->master, d->mom, d->norm};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) pl_free(b[i]);
    pl_event_destroy(d->ready), pl_event_destroy(d->done);
}

static const void *ddp_params(ddp *d, int u) { return (char *)d->params + d->uoff[u] * d->es; }
static const void *ddp_pre_forward(void *z, int u) { return ddp_params(z, u); }
static void ddp_post_forward(void *z, int u) { (void)z, (void)u; }
static const void *ddp_pre_backward(void *z, int u, void **g) {
    ddp *d = z;
    *g = (char *)d->grads + d->uoff[u] * d->es;
    return ddp_params(d, u);
}
/* fp32 only: the harness has no bf16 all-reduce (a bf16 DDP is measured, never stepped) */
static void ddp_post_backward(void *z, int u) {
    ddp *d = z;
    pl_event_record(d->ready, NULL);
    pl_stream_wait_event(pl_stream_comm(), d->ready);
    float *g = (float *)d->grads + d->uoff[u];
    pl_allreduce(g, g, d->m->unit[u].numel, PL_AVG, d->comm, pl_stream_comm());
}
static void ddp_step(void *z) {
    ddp *d = z;
    pl_event_record(d->done, pl_stream_comm());
    pl_stream_wait_event(NULL, d->done);
    size_t n = d->m->numel;
    pl_fill(d->norm, 0.0f, 1, NULL);
    kern_clip_sumsq(d->norm, d->grads, n, NULL); /* every rank holds the whole averaged gradient */
    kern_clip_coef(d->norm + 1, d->norm, d->cfg.max_norm, NULL);
    const zero_config *c = &d->cfg;
    kern_clip_adamw(d->params, d->mom, d->mom + n, d->grads, d->norm + 1, n, c->lr, c->beta1, c->beta2, c->eps,
                    c->weight_decay, ++d->step, NULL);
}
static const l7_hooks DDP_HOOKS = {ddp_pre_forward, ddp_post_forward, ddp_pre_backward, ddp_post_backward, ddp_step};

/* ==================================================================================== */
/* What the modes share                                                                  */
/* ==================================================================================== */

enum { M_DDP, M_Z1, M_Z2, M_Z3, M_N };
static const char *const M_NAMES[M_N] = {"ddp", "zero1", "zero2", "zero3"};

static gpt_config mode_model(const mode_ctx *L, int vocab, int batch) {
    return (gpt_config){.seq = 32, .batch = batch, .hidden = L->f->mode_hidden, .heads = 4, .ffn = 4 * L->f->mode_hidden,
                        .vocab = vocab, .max_pos = 32};
}

static zero_config mode_config(const mode_ctx *L, int which, zero_dtype dt, size_t cap) {
    l7_cfg lc = l7_config(L->f, which == M_Z2 ? V_Z2 : which == M_Z3 ? V_Z3 : V_Z1);
    zero_config c = l7_zero_config(&lc);
    c.param_dtype = c.reduce_dtype = dt;
    c.bucket_cap = cap;
    c.lr = 3e-3f;
    return c;
}

/* A model's initial parameters on the device (freed with free_init). */
static void make_init(const zero_model *m, const gpt_config *mc, uint64_t seed, float **dev) {
    for (int u = 0; u < m->nunits; u++) {
        float *h = l7_init_unit((const l7_model *)m, mc, seed, u); /* the same layout (lab07_kit.c) */
        dev[u] = pl_malloc_floats(m->unit[u].numel);
        pl_upload(dev[u], h, m->unit[u].numel * 4);
        free(h);
    }
}
static void free_init(const zero_model *m, float **dev) {
    for (int u = 0; u < m->nunits; u++) pl_free(dev[u]);
}

/* Every rank's stage or the kit's DDP behind one pointer. */
typedef struct {
    int which;
    ddp d;
    zero_state z;
} runner;

/* Variant `which` (in `dt`, bucket cap Ψ/4 + 1) from the seed's initial parameters of the
 * model mc describes (the global batch's, for the same weights at every world size). */
static void runner_init(runner *r, const mode_ctx *L, int which, zero_dtype dt, const zero_model *m,
                        const gpt_config *mc) {
    float *init[ZERO_MAX_UNITS];
    make_init(m, mc, L->seed, init);
    zero_config c = mode_config(L, which, dt, m->numel / 4 + 1);
    r->which = which;
    if (which == M_DDP) ddp_init(&r->d, m, &c, L->world, init);
    else zero_init(&r->z, m, &c, L->world, init);
    free_init(m, init);
}
static void *runner_state(runner *r) { return r->which == M_DDP ? (void *)&r->d : (void *)&r->z; }
static const l7_hooks *runner_hooks(const runner *r) { return r->which == M_DDP ? &DDP_HOOKS : &L7_STUDENT_HOOKS; }
static void runner_free(runner *r) {
    if (r->which == M_DDP) ddp_free(&r->d);
    else zero_free(&r->z);
}

/* ==================================================================================== */
/* train                                                                                 */
/* ==================================================================================== */

/* Step s's sequences [j0, j0 + b) of the global batch: windows of T + 1 bytes at
 * positions from the counter RNG, tokens byte t and targets byte t + 1, [T, b]. */
static void text_batch(const mode_ctx *L, const unsigned char *text, size_t n, int s, int j0, int b, int T, int *tok, int *tgt) {
    for (int j = 0; j < b; j++) {
        size_t at = (size_t)(pl_rng_bits(L->seed, 77, (uint64_t)s * 65536 + (uint64_t)(j0 + j)) % (n - (size_t)T - 1));
        for (int t = 0; t < T; t++) tok[t * b + j] = text[at + t], tgt[t * b + j] = text[at + t + 1];
    }
}

int l7_mode_train(void) {
    mode_ctx ctx = context(), *L = &ctx;
    int np = L->np, G = L->f->mode_batch, b = G / np;
    if (G % np) pl_usage_error("--mode-batch %d is not a multiple of the world size %d", G, np);
    size_t n;
    unsigned char *text = drv_read_text(L->f->text, "labs/07-zero/README.md", &n);
    gpt_config mc = mode_model(L, 256, b), mg = mode_model(L, 256, G);
    zero_model m;
    describe(&m, &mc, L->f->mode_layers);
    int T = mc.seq, *tok = malloc((size_t)T * b * sizeof(int)), *tgt = malloc((size_t)T * b * sizeof(int));
    PL_CHECK(tok && tgt, "out of host memory");
    drv_say("# train: GPT of %d blocks, C=%d, %zu parameters; %d sequences of %d bytes per step (%d per rank), AdamW "
            "lr 3e-3 clipped at %.1f, %d steps, each of ddp zero1 zero2 zero3 from the same start\n",
            L->f->mode_layers, mc.hidden, m.numel, G, T, b, L->f->max_norm, L->f->train_steps);
    double *curve = malloc((size_t)M_N * L->f->train_steps * sizeof *curve);
    PL_CHECK(curve != NULL, "out of host memory");
    for (int which = 0; which < M_N; which++) {
        l7_kit *kit = l7_kit_new(&mc, &m, ZERO_FP32);
        runner r;
        runner_init(&r, L, which, ZERO_FP32, &m, &mg);
        double t0 = pl_now();
        for (int s = 0; s < L->f->train_steps; s++) {
            text_batch(L, text, n, s, L->rank * b, b, T, tok, tgt);
            char why[200] = "";
            double loss = l7_kit_step(kit, runner_hooks(&r), runner_state(&r), tok, tgt, NULL, why, sizeof why);
            if (drv_max(why[0] != 0) > 0) pl_usage_error("%s: %s", M_NAMES[which], why[0] ? why : "a hook failed on another rank");
            loss = drv_sum(loss) / np;
            curve[which * L->f->train_steps + s] = loss;
            if (L->rank == 0 && (s % 10 == 0 || s + 1 == L->f->train_steps)) {
                int w = 30, filled = (int)((s + 1) * w / L->f->train_steps);
                fprintf(stderr, "\r%-6s [%.*s%*s] %3d%% loss %.4f %6.1f steps/s", M_NAMES[which], filled,
                        "##############################", w - filled, "", (int)(100 * (s + 1) / L->f->train_steps), loss,
                        (s + 1) / (pl_now() - t0));
            }
            pl_trace_clear(); /* a long run: keep the record from growing */
        }
        if (L->rank == 0) fprintf(stderr, "\n");
        for (int s = 0; s < L->f->train_steps; s++) { /* after the bar: the curve, step by step */
            double loss = curve[which * L->f->train_steps + s], ddp_loss = curve[s];
            drv_say("train step %d np %d %s loss %.6f ddp %.6f rel_diff %.2e\n", s, np, M_NAMES[which], loss, ddp_loss,
                    fabs(loss - ddp_loss) / fabs(ddp_loss));
        }
        runner_free(&r);
        l7_kit_free(kit);
    }
    double worst = 0;
    for (int which = 1; which < M_N; which++)
        for (int s = 0; s < L->f->train_steps; s++)
            worst = fmax(worst, fabs(curve[which * L->f->train_steps + s] - curve[s]) / fabs(curve[s]));
    /* A stage and DDP sum the ranks' gradients in other orders (a reduce-scatter per bucket or
     * unit, an all-reduce per unit): 1e-7 apart after a step, which hundreds of AdamW steps
     * amplify (README.md: 8.5e-6 after 200 steps at 4 ranks). Equal means within 1e-4. */
    const double tol = 1e-4;
    bool ok = worst <= tol;
    drv_say("# train: loss %.4f -> %.4f; the stages' curves and DDP's differ by %.2e at most (relative; tolerance %.0e): %s\n",
            curve[0], curve[L->f->train_steps - 1], worst, tol, ok ? "equal" : "DIFFERENT");
    free(curve), free(tok), free(tgt), free(text);
    return ok ? 0 : 1;
}

/* ==================================================================================== */
/* memory                                                                                */
/* ==================================================================================== */

/* ZeRO's model-state bytes per parameter (the paper's table): what every rank keeps whole
 * and what it keeps 1/N of. */
static void coefs(int which, bool bf16, double *rep, double *shard) {
    static const double rep32[M_N] = {16, 8, 4, 0}, sh32[M_N] = {0, 8, 12, 16};
    static const double rep16[M_N] = {16, 4, 2, 0}, sh16[M_N] = {0, 12, 14, 16};
    *rep = bf16 ? rep16[which] : rep32[which];
    *shard = bf16 ? sh16[which] : sh32[which];
}
static double formula(int which, double psi, double N, bool bf16) {
    double rep, shard;
    coefs(which, bf16, &rep, &shard);
    return psi * (rep + shard / N);
}

int l7_mode_memory(void) {
    mode_ctx ctx = context(), *L = &ctx;
    int np = L->np;
    gpt_config mc = mode_model(L, 256, 1);
    zero_model m;
    describe(&m, &mc, L->f->mode_layers);
    drv_say("# memory at %d rank(s): GPT of %d blocks, C=%d, Ψ = %zu parameters; model states per rank in bytes "
            "(parameters + gradients + optimizer state), measured from the memory categories after init, and "
            "ZeRO's formula with this Ψ (padding makes the measurement slightly larger)\n",
            np, L->f->mode_layers, mc.hidden, m.numel);
    for (int dt = 0; dt < 2; dt++)
        for (int which = 0; which < M_N; which++) {
            runner r;
            runner_init(&r, L, which, (zero_dtype)dt, &m, &mc);
            double got[3];
            for (int k = 0; k < 3; k++) got[k] = drv_max((double)pl_mem_tag_in_use((pl_mem_tag)(PL_MEM_PARAMS + k)));
            runner_free(&r);
            double total = got[0] + got[1] + got[2], f = formula(which, (double)m.numel, np, dt == 1);
            drv_say("memory np %d dtype %s stage %s params %.0f grads %.0f optim %.0f total %.0f formula %.0f "
                    "bytes_per_param %.3f\n",
                    np, dt ? "bf16" : "fp32", M_NAMES[which], got[0], got[1], got[2], total, f, total / (double)m.numel);
        }
    /* the real models: bf16 mixed precision, model states only (no activations, no
     * fragmentation, no communication buffers), 80 GB = 80e9 bytes */
    static const struct {
        const char *name;
        double psi;
    } real[] = {{"GPT-3-175B", 175e9}, {"Llama-3-70B", 70.55e9}};
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++)
        for (int which = 0; which < M_N; which++) {
            double rc, sc, gb = 80e9;
            coefs(which, true, &rc, &sc);
            double rep = rc * real[i].psi, sh = sc * real[i].psi, need = 0;
            if (rep < gb) need = sh > 0 ? ceil(sh / (gb - rep)) : 1; /* smallest N with rep + sh / N <= 80 GB */
            char n_fit[32];
            if (need > 0) snprintf(n_fit, sizeof n_fit, "%.0f", need);
            else snprintf(n_fit, sizeof n_fit, "none");
            drv_say("realmodel %s psi %.4g stage %s bytes_at_N64 %.4g replicated %.4g smallest_N_80GB %s\n", real[i].name,
                    real[i].psi, M_NAMES[which], formula(which, real[i].psi, 64, true), rep, n_fit);
        }
    return 0;
}

/* ==================================================================================== */
/* bench                                                                                 */
/* ==================================================================================== */

int l7_mode_bench(void) {
    mode_ctx ctx = context(), *L = &ctx;
    char perr[300];
    L->have_prof = plc_profile_load(&L->prof, L->f->profile, perr, sizeof perr) == 0;
    if (!L->have_prof && strcmp(L->f->profile, "dgx-h100")) pl_usage_error("--profile: %s", perr);
    int np = L->np, G = L->f->mode_batch, b = G / np, iters = drv_opts()->iters > 0 ? drv_opts()->iters : 5;
    if (G % np) pl_usage_error("--mode-batch %d is not a multiple of the world size %d", G, np);
    gpt_config mc = mode_model(L, 256, b), mg = mode_model(L, 256, G);
    zero_model m;
    describe(&m, &mc, L->f->mode_layers);
    int T = mc.seq, *tok = malloc((size_t)T * b * sizeof(int)), *tgt = malloc((size_t)T * b * sizeof(int));
    PL_CHECK(tok && tgt, "out of host memory");
    for (int i = 0; i < T * b; i++) tok[i] = (int)(pl_rng_bits(L->seed, 41, (uint64_t)(L->rank * T * b + i)) % 256), tgt[i] = (tok[i] + 1) % 256;
    double ddp_ms = 0, ddp_pred = 0;
    drv_say("# bench at %d rank(s): GPT of %d blocks, C=%d, Ψ = %zu, %d sequences of %d per step; median of %d steps "
            "measured here, the last replayed on %s\n",
            np, L->f->mode_layers, mc.hidden, m.numel, G, T, iters, L->have_prof ? L->prof.name : "(no profile)");
    for (int which = 0; which < M_N; which++) {
        l7_kit *kit = l7_kit_new(&mc, &m, ZERO_FP32);
        runner r;
        runner_init(&r, L, which, ZERO_FP32, &m, &mg);
        double *t = malloc((size_t)(iters + 1) * sizeof *t), pred = 0;
        PL_CHECK(t != NULL, "out of host memory");
        char why[200] = "";
        for (int it = 0; it <= iters; it++) { /* the first is a warm-up */
            pl_barrier(L->world);
            pl_trace_clear();
            double t0 = pl_now();
            l7_kit_step(kit, runner_hooks(&r), runner_state(&r), tok, tgt, NULL, why, sizeof why);
            t[it] = drv_max(1e3 * (pl_now() - t0));
        }
        if (drv_max(why[0] != 0) > 0) pl_usage_error("%s: %s", M_NAMES[which], why[0] ? why : "a hook failed on another rank");
        plc_prediction pp;
        char err[200];
        if (L->have_prof && plc_replay_trace(&L->prof, 0, L->world, &pp, err, sizeof err) == 0) pred = pp.step_time * 1e6;
        /* the median of the timed steps */
        for (int i = 1; i <= iters; i++)
            for (int j = i + 1; j <= iters; j++)
                if (t[j] < t[i]) {
                    double x = t[i];
                    t[i] = t[j], t[j] = x;
                }
        double ms = t[1 + (iters - 1) / 2];
        if (which == M_DDP) ddp_ms = ms, ddp_pred = pred;
        drv_say("bench07 np %d stage %-5s step_ms %8.3f vs_ddp %.2f pred_step_us %9.1f pred_vs_ddp %.2f profile %s\n", np,
                M_NAMES[which], ms, ms / ddp_ms, pred, ddp_pred > 0 ? pred / ddp_pred : 0, L->have_prof ? L->prof.name : "-");
        free(t);
        runner_free(&r);
        l7_kit_free(kit);
    }
    free(tok), free(tgt);
    return 0;
}
