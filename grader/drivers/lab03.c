/* lab03.c - the driver of Lab 3 (Megatron tensor-parallel block, sequence parallelism).
 *
 * Every rank builds the serial master block from the counter RNG (the same bits the
 * student's shards come from), runs the kit's independent host reference of the block
 * (models/gpt_host: plain loops, double accumulation), and compares the student's outputs,
 * input gradients and every gradient shard with the matching slice of the serial ones.
 * Lab 3 stores weights [in x out] (Y = XA, the Megatron paper's notation, so that a
 * column-parallel shard is a block of columns); the reference takes [out x in], the kit's
 * convention, so the driver transposes between the two.
 *
 * Cases:
 *   config.errors        mg_config_check: heads % tp, seq % tp with sp, hidden % heads
 *   forward.nosp / .sp   one block's output
 *   backward.nosp / .sp  dx and every gradient shard (sp: after mg_sync_sp_grads)
 *   comm.nosp / .sp      collectives per block forward and backward vs the formulas
 *   memory.sp            activation bytes with sp vs without (the LN/residual regions / tp)
 *   train.nosp / .sp     a stack of L blocks, one SGD step: loss and the parameter update
 * The forward, backward and comm cases of one sp setting share one run of the block.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_block_forward/backward (the serial reference)
#include "lab03.h"    // defines: what this file shares with lab03_train.c; brings in megatron.h

int g_T = 7, g_B = 2, g_C = 32, g_H = 8, g_F = 128, g_L = 2, g_iters = 5;
int g_me, g_tp;
uint64_t g_seed;

/* ================================================================================== */
/* The serial master block and its reference                                          */
/* ================================================================================== */


static const bool WEIGHT[MG_NTENSORS] = {[MG_QKV_W] = true, [MG_PROJ_W] = true, [MG_FC1_W] = true, [MG_FC2_W] = true};
static const char *TNAME[MG_NTENSORS] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
                                         "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};

float *hz(size_t n) {
    float *p = calloc(n + 1, sizeof(float));
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}
size_t numel(const mg_config *c, mg_tensor w) {
    int64_t r, k;
    mg_master_shape(c, w, &r, &k);
    return (size_t)(r * k);
}
void host_block_alloc(host_block *h, const mg_config *c) {
    for (int w = 0; w < MG_NTENSORS; w++) h->t[w] = hz(numel(c, (mg_tensor)w));
}
void host_block_free(host_block *h) {
    for (int w = 0; w < MG_NTENSORS; w++) free(h->t[w]);
}
/* The master tensors, generated through the same inline function the student uses. */
void host_block_master(host_block *h, const mg_config *c, int layer) {
    for (int w = 0; w < MG_NTENSORS; w++) {
        int64_t r, k;
        mg_master_shape(c, (mg_tensor)w, &r, &k);
        float *d = pl_malloc_floats((size_t)(r * k));
        mg_fill_master(pl_tensor_view(d, r, k), c, (mg_tensor)w, layer, 0, 0, g_seed);
        pl_download(h->t[w], d, (size_t)(r * k) * sizeof(float));
        pl_free(d);
    }
}
/* Lab 3 [in x out] <-> the reference's [out x in]: weights transposed, vectors copied. */
static void convert(const mg_config *c, float *const *from, float *const *to, bool to_gpt) {
    for (int w = 0; w < MG_NTENSORS; w++) {
        int64_t R, K;
        mg_master_shape(c, (mg_tensor)w, &R, &K);
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < K; j++) {
                size_t lab = (size_t)(i * K + j), gpt = WEIGHT[w] ? (size_t)(j * R + i) : lab;
                if (to_gpt) to[w][gpt] = from[w][lab];
                else to[w][lab] = from[w][gpt];
            }
    }
}
static gpt_config gcfg(const mg_config *c) {
    return (gpt_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn};
}

/* The serial block: y = block(x); with dy, dx and the gradients (Lab 3's layout, +=). */
void reference(const mg_config *c, const host_block *p, host_block *g, float *y, const float *x,
                      float *dx, const float *dy) {
    gpt_config gc = gcfg(c);
    gpt_block_params gp, gg;
    gpt_host_block_alloc(&gp, &gc);
    gpt_host_block_alloc(&gg, &gc);
    convert(c, p->t, gp.t, true);
    gpt_host_acts a;
    gpt_host_acts_alloc(&a, &gc);
    gpt_host_block_forward(&gc, &gp, &a, y, x);
    if (dy) {
        gpt_host_block_backward(&gc, &gp, &gg, &a, dx, dy);
        host_block tmp;
        host_block_alloc(&tmp, c);
        convert(c, gg.t, tmp.t, false);
        for (int w = 0; w < MG_NTENSORS; w++)
            for (size_t i = 0; i < numel(c, (mg_tensor)w); i++) g->t[w][i] += tmp.t[w][i];
        host_block_free(&tmp);
    }
    gpt_host_acts_free(&a);
    gpt_host_params_free(gp.base);
    gpt_host_params_free(gg.base);
}

/* ================================================================================== */
/* Comparing shards with the master                                                    */
/* ================================================================================== */

/* The part of master tensor w that this rank holds, and where it sits in mg_params. */
static float *shard_of(const mg_config *c, const mg_params *p, mg_tensor w, int64_t *r0, int64_t *c0,
                       int64_t *rows, int64_t *cols) {
    int64_t R, K, Cl = c->hidden / g_tp, Fl = c->ffn / g_tp;
    mg_master_shape(c, w, &R, &K);
    *r0 = 0, *c0 = 0, *rows = R, *cols = K;
    float *replicated[MG_NTENSORS] = {p->ln1_w, p->ln1_b, NULL, NULL, NULL, p->proj_b, p->ln2_w, p->ln2_b, NULL, NULL, NULL, p->fc2_b};
    switch (w) {
    case MG_QKV_W: case MG_QKV_B: *c0 = g_me * 3 * Cl, *cols = 3 * Cl; return w == MG_QKV_W ? p->qkv_w : p->qkv_b;
    case MG_FC1_W: case MG_FC1_B: *c0 = g_me * Fl, *cols = Fl; return w == MG_FC1_W ? p->fc1_w : p->fc1_b;
    case MG_PROJ_W: *r0 = g_me * Cl, *rows = Cl; return p->proj_w;
    case MG_FC2_W: *r0 = g_me * Fl, *rows = Fl; return p->fc2_w;
    default: return replicated[w];
    }
}

/* relative Frobenius error of got vs want (NaN -> inf) */
static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d, den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Error of the shard of w in p against the master (with `base`: of p - base, an update). */
double shard_err(const mg_config *c, const mg_params *p, const host_block *want, mg_tensor w, const host_block *base) {
    int64_t r0, c0, rows, cols, R, K;
    float *ptr = shard_of(c, p, w, &r0, &c0, &rows, &cols);
    mg_master_shape(c, w, &R, &K);
    size_t n = (size_t)(rows * cols);
    float *got = hz(n), *exp = hz(n);
    pl_download(got, ptr, n * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            size_t mi = (size_t)((r0 + i) * K + c0 + j);
            exp[i * cols + j] = want->t[w][mi];
            if (base) got[i * cols + j] -= base->t[w][mi];
        }
    double e = rel_err(got, exp, n);
    free(got), free(exp);
    return e;
}

/* ================================================================================== */
/* Cases                                                                               */
/* ================================================================================== */

mg_config config(bool sp, int T) { return (mg_config){T, g_B, g_C, g_H, g_F, sp, pl_comm_world()}; }
int seq_for(bool sp) { return sp ? g_tp * ((g_T + g_tp - 1) / g_tp) : g_T; }
int local_rows(const mg_config *c) { return c->sp ? c->seq * c->batch / g_tp : c->seq * c->batch; }
size_t row0(const mg_config *c) { return c->sp ? (size_t)g_me * local_rows(c) : 0; }

void config_check(drv_case *c) {
    char bad[200] = "";
    mg_config k = config(false, g_T);
    if (mg_config_check(&k) != MG_OK) snprintf(bad, sizeof bad, "valid config rejected");
    k.hidden = g_H * 4 + 1;
    if (!bad[0] && mg_config_check(&k) != MG_ERR_SHAPE) snprintf(bad, sizeof bad, "hidden %% heads != 0 not reported as MG_ERR_SHAPE");
    if (g_tp > 1) {
        k = config(false, g_T), k.heads = g_tp + 1, k.hidden = k.heads * 4;
        if (!bad[0] && mg_config_check(&k) != MG_ERR_HEADS) snprintf(bad, sizeof bad, "heads %d at tp %d not reported as MG_ERR_HEADS", k.heads, g_tp);
        k = config(true, g_tp * 2 + 1);
        if (!bad[0] && mg_config_check(&k) != MG_ERR_SEQ) snprintf(bad, sizeof bad, "sp with seq %d at tp %d not reported as MG_ERR_SEQ", k.seq, g_tp);
        k = config(false, g_tp * 2 + 1);
        if (!bad[0] && mg_config_check(&k) != MG_OK) snprintf(bad, sizeof bad, "odd seq without sp rejected");
    }
    if (bad[0]) drv_fail(c, "%s", bad);
    else drv_note(c, "errors reported for bad shapes");
}

/* One run of the block per sp setting, shared by forward.*, backward.* and comm.* */
typedef struct {
    bool done, bad_config;
    double ef, eb, tol;
    char worst[16];
    pl_metrics mf, mb;
    pl_timing t;
    double flops, comm_frac;
} block_stats;
static block_stats g_block[2];

typedef struct {
    mg_config c;
    mg_params p, g;
    mg_acts *a;
    float *x, *y, *dx, *dy;
} block_run;

static void fwd_bwd(void *arg) {
    block_run *b = arg;
    mg_block_forward(&b->c, &b->p, b->a, b->y, b->x, NULL);
    mg_block_backward(&b->c, &b->p, &b->g, b->a, b->dx, b->dy, NULL);
}
static void fwd(void *arg) { block_run *b = arg; mg_block_forward(&b->c, &b->p, b->a, b->y, b->x, NULL); }
static void bwd(void *arg) { block_run *b = arg; mg_block_backward(&b->c, &b->p, &b->g, b->a, b->dx, b->dy, NULL); }

static void block_compute(bool sp, block_stats *st) {
    block_run b = {.c = config(sp, seq_for(sp))};
    st->done = true;
    if ((st->bad_config = drv_max(mg_config_check(&b.c) != MG_OK) > 0)) return;
    int N = b.c.seq * b.c.batch, C = g_C, Nl = local_rows(&b.c);
    size_t NC = (size_t)N * C, NlC = (size_t)Nl * C;
    host_block hp, hg;
    host_block_alloc(&hp, &b.c), host_block_alloc(&hg, &b.c);
    host_block_master(&hp, &b.c, 0);
    float *hx = hz(NC), *hy = hz(NC), *hdy = hz(NC), *hdx = hz(NC), *got = hz(NC);
    pl_rng_fill_host(hx, N, C, C, 0, 0, g_seed, 7, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(hdy, N, C, C, 0, 0, g_seed, 8, PL_RNG_UNIFORM, -1, 1);
    reference(&b.c, &hp, &hg, hy, hx, hdx, hdy);
    mg_params_alloc(&b.p, &b.c), mg_params_alloc(&b.g, &b.c);
    mg_params_init(&b.p, &b.c, 0, g_seed);
    pl_fill(b.g.base, 0, b.g.count, NULL);
    b.x = pl_malloc_floats(NlC), b.dy = pl_malloc_floats(NlC), b.y = drv_poisoned(NlC), b.dx = drv_poisoned(NlC);
    pl_upload(b.x, hx + row0(&b.c) * C, NlC * sizeof(float));
    pl_upload(b.dy, hdy + row0(&b.c) * C, NlC * sizeof(float));
    b.a = mg_acts_alloc(&b.c);
    drv_measure(fwd, &b, &st->mf);
    pl_download(got, b.y, NlC * sizeof(float));
    st->ef = rel_err(got, hy + row0(&b.c) * C, NlC);
    drv_measure(bwd, &b, &st->mb);
    mg_sync_sp_grads(&b.c, &b.g, NULL);
    pl_download(got, b.dx, NlC * sizeof(float));
    st->eb = rel_err(got, hdx + row0(&b.c) * C, NlC);
    snprintf(st->worst, sizeof st->worst, "dx");
    for (int w = 0; w < MG_NTENSORS; w++) {
        double ew = shard_err(&b.c, &b.g, &hg, (mg_tensor)w, NULL);
        if (!(ew <= st->eb)) st->eb = ew, snprintf(st->worst, sizeof st->worst, "%s", TNAME[w]);
    }
    /* performance: fwd+bwd time per rank, GEMM flops/s, time inside collectives */
    pl_metrics_reset();
    size_t first = pl_trace_count();
    st->t = drv_time(fwd_bwd, &b, 1, g_iters);
    pl_metrics mt;
    pl_metrics_get(&mt);
    double comm = 0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = first; i < pl_trace_count(); i++)
        if (pl_op_is_collective(ev[i].kind)) comm += ev[i].t_end - ev[i].t_start;
    int runs = 1 + (drv_opts()->iters > 0 ? drv_opts()->iters : g_iters);
    st->flops = mt.gemm_flops / runs;
    st->comm_frac = drv_max(comm / runs / (st->t.mean_us * 1e-6));
    mg_acts_free(b.a);
    pl_free(b.x), pl_free(b.y), pl_free(b.dx), pl_free(b.dy);
    mg_params_free(&b.p), mg_params_free(&b.g);
    host_block_free(&hp), host_block_free(&hg);
    free(hx), free(hy), free(hdy), free(hdx), free(got);
}

void block_run_case(drv_case *c) {
    if (!g_block[c->arg[0]].done) block_compute(c->arg[0], &g_block[c->arg[0]]);
}

void forward_check(drv_case *c) {
    const block_stats *st = &g_block[c->arg[0]];
    if (st->bad_config) drv_error(c, "mg_config_check rejected a valid config");
    else drv_check_error(c, "block output (vs the serial block)", st->ef, drv_tolerance());
}
void backward_check(drv_case *c) {
    const block_stats *st = &g_block[c->arg[0]];
    char what[64];
    snprintf(what, sizeof what, "dx and all gradient shards (worst: %s)", st->worst);
    if (st->bad_config) drv_error(c, "mg_config_check rejected a valid config");
    else drv_check_error(c, what, st->eb, drv_tolerance());
}

/* Counted calls and bytes against the formulas: without sp two all-reduces each way; with
 * sp two all-gathers + two reduce-scatters forward, four all-gathers (two re-gather the
 * layer-norm outputs the weight gradients need) + two reduce-scatters backward. */
static bool counts_ok(const pl_metrics *m, int ar, int ag, int rs, double bytes, char *why, size_t n) {
    uint64_t AR = m->coll_calls[PL_OP_ALLREDUCE], AG = m->coll_calls[PL_OP_ALLGATHER], RS = m->coll_calls[PL_OP_REDUCE_SCATTER];
    bool exact = AR == (uint64_t)ar && AG == (uint64_t)ag && RS == (uint64_t)rs && m->coll_total == AR + AG + RS &&
                 fabs((double)m->coll_bytes - bytes) < 0.5;
    bool none = g_tp == 1 && m->coll_total == 0; /* at tp 1 the operators may be skipped */
    snprintf(why, n, "%llu all-reduce, %llu all-gather, %llu reduce-scatter, %llu calls, %.0f bytes (expected %d, %d, %d, %.0f bytes)",
             (unsigned long long)AR, (unsigned long long)AG, (unsigned long long)RS, (unsigned long long)m->coll_total,
             (double)m->coll_bytes, ar, ag, rs, bytes);
    return exact || none;
}

void comm_check(drv_case *c) {
    const block_stats *st = &g_block[c->arg[0]];
    bool sp = c->arg[0];
    if (st->bad_config) {
        drv_error(c, "mg_config_check rejected a valid config");
        return;
    }
    double S = (double)seq_for(sp) * g_B * g_C * sizeof(float);
    char wf[256], wb[256];
    bool okf = sp ? counts_ok(&st->mf, 0, 2, 2, 4 * S, wf, sizeof wf) : counts_ok(&st->mf, 2, 0, 0, 2 * S, wf, sizeof wf);
    bool okb = sp ? counts_ok(&st->mb, 0, 4, 2, 6 * S, wb, sizeof wb) : counts_ok(&st->mb, 2, 0, 0, 2 * S, wb, sizeof wb);
    drv_num(c, "coll_bytes_fwd", (double)st->mf.coll_bytes);
    drv_num(c, "coll_bytes_bwd", (double)st->mb.coll_bytes);
    drv_num(c, "lib_calls", (double)(st->mf.coll_total + st->mb.coll_total));
    if (!okf || !okb) drv_fail(c, "forward: %s; backward: %s", wf, wb);
    else drv_note(c, "forward: %s; backward: %s", wf, wb);
}

void comm_perf(drv_case *c) {
    const block_stats *st = &g_block[c->arg[0]];
    drv_print("perf block fwd+bwd tp=%d sp=%d T=%d B=%d C=%d H=%d F=%d: %.1f us per rank (median), %.3f GFLOP/s per rank (GEMMs), comm fraction %.2f\n",
              g_tp, (int)c->arg[0], seq_for(c->arg[0]), g_B, g_C, g_H, g_F, st->t.median_us,
              st->flops / (st->t.median_us * 1e-6) / 1e9, st->comm_frac);
}

