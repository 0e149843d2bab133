/* lab03.c - the driver of Lab 3 (Megatron tensor-parallel block, sequence parallelism).
 *
 * Every rank builds the serial master block from the counter RNG (the same bits the
 * student's shards come from), runs an independent serial block on the host (plain-loop
 * GEMMs and the kernels' CPU references), and compares the student's outputs, input
 * gradients and every gradient shard with the matching slice of the serial ones.
 * Collective calls and bytes are counted by the harness around the student's calls.
 *
 * Cases (names without the engine's npN/ prefix):
 *   config.errors        mg_config_check: heads % tp, seq % tp with sp, hidden % heads
 *   forward.nosp / .sp   one block's output
 *   backward.nosp / .sp  dx and every gradient shard (sp: after mg_sync_sp_grads)
 *   comm.nosp / .sp      collectives per block forward and backward vs the formulas
 *   memory.sp            activation bytes with sp vs without (the LN/residual regions / tp)
 *   train.nosp / .sp     a stack of L blocks, one SGD step: loss and the parameter update
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "kern_attention.h"
#include "kern_bias.h"      // defines: kern_bias_cost (the predicted block's kernels)
#include "kern_gelu.h"
#include "kern_layernorm.h"
#include "kern_residual.h"  // defines: kern_residual_cost
#include "kern_softmax.h"   // defines: kern_softmax_cost
#include "megatron.h"
#include "pl_costmodel.h" // defines: plc_profile_load, plc_replay (the dgx-h100 prediction)

static int g_T = 7, g_B = 2, g_C = 32, g_H = 8, g_F = 128, g_L = 2, g_iters = 5;
static int g_me, g_tp;
static uint64_t g_seed;
static double g_tol;

/* ================================================================================== */
/* The serial master block on the host                                                 */
/* ================================================================================== */

typedef struct { float *t[MG_NTENSORS]; } host_block; /* full master tensors */

static size_t master_numel(const mg_config *c, mg_tensor w) {
    int64_t r, k;
    mg_master_shape(c, w, &r, &k);
    return (size_t)(r * k);
}

static void host_block_alloc(host_block *h, const mg_config *c, bool zero) {
    for (int w = 0; w < MG_NTENSORS; w++) {
        h->t[w] = calloc(master_numel(c, (mg_tensor)w) + 1, sizeof(float));
        if (!h->t[w]) pl_fatal(__FILE__, __LINE__, "calloc", "out of host memory");
    }
    (void)zero;
}
static void host_block_free(host_block *h) {
    for (int w = 0; w < MG_NTENSORS; w++) free(h->t[w]);
}
/* The master tensors, generated through the same inline function the student uses. */
static void host_block_master(host_block *h, const mg_config *c, int layer) {
    for (int w = 0; w < MG_NTENSORS; w++) {
        int64_t r, k;
        mg_master_shape(c, (mg_tensor)w, &r, &k);
        float *d = pl_malloc_floats((size_t)(r * k));
        mg_fill_master(pl_tensor_view(d, r, k), c, (mg_tensor)w, layer, 0, 0, g_seed);
        pl_download(h->t[w], d, (size_t)(r * k) * sizeof(float));
        pl_free(d);
    }
}

/* C[m, n] = beta C + op(A) op(B), row-major, plain loops (double accumulation). */
static void mm(bool ta, bool tb, int m, int n, int k, const float *A, const float *B, float beta,
               float *Cm) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++)
                acc += (double)(ta ? A[(size_t)p * m + i] : A[(size_t)i * k + p]) *
                       (tb ? B[(size_t)j * k + p] : B[(size_t)p * n + j]);
            Cm[(size_t)i * n + j] = (float)(beta * Cm[(size_t)i * n + j] + acc);
        }
}
static void add_bias(float *y, const float *b, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) y[(size_t)i * cols + j] += b[j];
}
static void bias_grad(float *db, const float *dy, int rows, int cols) {
    for (int j = 0; j < cols; j++) {
        double acc = 0;
        for (int i = 0; i < rows; i++) acc += dy[(size_t)i * cols + j];
        db[j] += (float)acc;
    }
}
static float *hz(size_t n) {
    float *p = calloc(n + 1, sizeof(float));
    if (!p) pl_fatal(__FILE__, __LINE__, "calloc", "out of host memory");
    return p;
}

typedef struct {
    float *x, *ln1, *m1, *r1, *qkv, *probs, *att, *x1, *ln2, *m2, *r2, *fc1, *gel;
} host_acts;

static void host_forward(const mg_config *c, const host_block *p, host_acts *a, float *y,
                         const float *x) {
    int T = c->seq, B = c->batch, C = c->hidden, H = c->heads, F = c->ffn, N = T * B, hs = C / H;
    size_t NC = (size_t)N * C;
    a->x = hz(NC); a->ln1 = hz(NC); a->m1 = hz(N); a->r1 = hz(N); a->qkv = hz(NC * 3);
    a->probs = hz((size_t)B * H * T * T); a->att = hz(NC); a->x1 = hz(NC); a->ln2 = hz(NC);
    a->m2 = hz(N); a->r2 = hz(N); a->fc1 = hz((size_t)N * F); a->gel = hz((size_t)N * F);
    float *o = hz(NC);
    memcpy(a->x, x, NC * sizeof(float));
    kern_layernorm_forward_ref(a->ln1, a->m1, a->r1, a->x, p->t[MG_LN1_W], p->t[MG_LN1_B], N, C, 1e-5f);
    mm(false, false, N, 3 * C, C, a->ln1, p->t[MG_QKV_W], 0, a->qkv);
    add_bias(a->qkv, p->t[MG_QKV_B], N, 3 * C);
    kern_attention_forward_ref(a->att, a->probs, a->qkv, T, B, H, hs, 1.0f / sqrtf((float)hs));
    mm(false, false, N, C, C, a->att, p->t[MG_PROJ_W], 0, o);
    add_bias(o, p->t[MG_PROJ_B], N, C);
    for (size_t i = 0; i < NC; i++) a->x1[i] = a->x[i] + o[i];
    kern_layernorm_forward_ref(a->ln2, a->m2, a->r2, a->x1, p->t[MG_LN2_W], p->t[MG_LN2_B], N, C, 1e-5f);
    mm(false, false, N, F, C, a->ln2, p->t[MG_FC1_W], 0, a->fc1);
    add_bias(a->fc1, p->t[MG_FC1_B], N, F);
    kern_gelu_forward_ref(a->gel, a->fc1, (size_t)N * F);
    mm(false, false, N, C, F, a->gel, p->t[MG_FC2_W], 0, o);
    add_bias(o, p->t[MG_FC2_B], N, C);
    for (size_t i = 0; i < NC; i++) y[i] = a->x1[i] + o[i];
    free(o);
}

static void host_acts_free(host_acts *a) {
    float *all[] = {a->x, a->ln1, a->m1, a->r1, a->qkv, a->probs, a->att, a->x1, a->ln2, a->m2, a->r2, a->fc1, a->gel};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* g += grads; dx written. */
static void host_backward(const mg_config *c, const host_block *p, host_block *g, const host_acts *a,
                          float *dx, const float *dy) {
    int T = c->seq, B = c->batch, C = c->hidden, H = c->heads, F = c->ffn, N = T * B, hs = C / H;
    size_t NC = (size_t)N * C;
    float *dgel = hz((size_t)N * F), *dh = hz(NC), *dx1 = hz(NC), *datt = hz(NC), *dqkv = hz(NC * 3);
    float *scr = hz((size_t)B * H * T * T);
    bias_grad(g->t[MG_FC2_B], dy, N, C);
    mm(true, false, F, C, N, a->gel, dy, 1, g->t[MG_FC2_W]);
    mm(false, true, N, F, C, dy, p->t[MG_FC2_W], 0, dgel);
    kern_gelu_backward_ref(dgel, dgel, a->fc1, (size_t)N * F);
    bias_grad(g->t[MG_FC1_B], dgel, N, F);
    mm(true, false, C, F, N, a->ln2, dgel, 1, g->t[MG_FC1_W]);
    mm(false, true, N, C, F, dgel, p->t[MG_FC1_W], 0, dh);
    kern_layernorm_backward_ref(dx1, g->t[MG_LN2_W], g->t[MG_LN2_B], dh, a->x1, p->t[MG_LN2_W], a->m2, a->r2, N, C);
    for (size_t i = 0; i < NC; i++) dx1[i] += dy[i];
    bias_grad(g->t[MG_PROJ_B], dx1, N, C);
    mm(true, false, C, C, N, a->att, dx1, 1, g->t[MG_PROJ_W]);
    mm(false, true, N, C, C, dx1, p->t[MG_PROJ_W], 0, datt);
    kern_attention_backward_ref(dqkv, scr, datt, a->qkv, a->probs, T, B, H, hs, 1.0f / sqrtf((float)hs));
    bias_grad(g->t[MG_QKV_B], dqkv, N, 3 * C);
    mm(true, false, C, 3 * C, N, a->ln1, dqkv, 1, g->t[MG_QKV_W]);
    mm(false, true, N, C, 3 * C, dqkv, p->t[MG_QKV_W], 0, dh);
    kern_layernorm_backward_ref(dx, g->t[MG_LN1_W], g->t[MG_LN1_B], dh, a->x, p->t[MG_LN1_W], a->m1, a->r1, N, C);
    for (size_t i = 0; i < NC; i++) dx[i] += dx1[i];
    free(dgel); free(dh); free(dx1); free(datt); free(dqkv); free(scr);
}

/* ================================================================================== */
/* Comparing shards with the master                                                    */
/* ================================================================================== */

/* The part of master tensor w that this rank holds, and where it sits in mg_params. */
static void shard_of(const mg_config *c, const mg_params *p, mg_tensor w, float **ptr,
                     int64_t *r0, int64_t *c0, int64_t *rows, int64_t *cols) {
    int64_t R, K;
    mg_master_shape(c, w, &R, &K);
    *r0 = 0, *c0 = 0, *rows = R, *cols = K;
    int64_t Cl = c->hidden / g_tp, Fl = c->ffn / g_tp;
    switch (w) {
    case MG_LN1_W: *ptr = p->ln1_w; break;
    case MG_LN1_B: *ptr = p->ln1_b; break;
    case MG_LN2_W: *ptr = p->ln2_w; break;
    case MG_LN2_B: *ptr = p->ln2_b; break;
    case MG_PROJ_B: *ptr = p->proj_b; break;
    case MG_FC2_B: *ptr = p->fc2_b; break;
    case MG_QKV_W: *ptr = p->qkv_w; *c0 = g_me * 3 * Cl; *cols = 3 * Cl; break;
    case MG_QKV_B: *ptr = p->qkv_b; *c0 = g_me * 3 * Cl; *cols = 3 * Cl; break;
    case MG_FC1_W: *ptr = p->fc1_w; *c0 = g_me * Fl; *cols = Fl; break;
    case MG_FC1_B: *ptr = p->fc1_b; *c0 = g_me * Fl; *cols = Fl; break;
    case MG_PROJ_W: *ptr = p->proj_w; *r0 = g_me * Cl; *rows = Cl; break;
    case MG_FC2_W: *ptr = p->fc2_w; *r0 = g_me * Fl; *rows = Fl; break;
    default: *ptr = NULL;
    }
}

static const char *TNAME[MG_NTENSORS] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
                                         "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};

/* relative Frobenius error of got vs want (NaN -> inf) */
static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Error of the shard of w in p against the master (or, with `base`, of p - base against
 * want: an update). */
static double shard_err(const mg_config *c, const mg_params *p, const host_block *want,
                        mg_tensor w, const host_block *base) {
    float *ptr;
    int64_t r0, c0, rows, cols, R, K;
    shard_of(c, p, w, &ptr, &r0, &c0, &rows, &cols);
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
    free(got);
    free(exp);
    return e;
}

/* ================================================================================== */
/* Cases                                                                               */
/* ================================================================================== */

static mg_config config(bool sp, int T) {
    mg_config c = {T, g_B, g_C, g_H, g_F, sp, pl_comm_world()};
    return c;
}
static int seq_for(bool sp) { return sp ? g_tp * ((g_T + g_tp - 1) / g_tp) : g_T; }
static int local_rows(const mg_config *c) { return c->sp ? c->seq * c->batch / g_tp : c->seq * c->batch; }
static size_t row0(const mg_config *c) { return c->sp ? (size_t)g_me * local_rows(c) : 0; }

static void emit(const char *name, const char *group, double err, double tol, const char *what) {
    drv_result *r = drv_result_new(name, group);
    err = drv_max(err);
    drv_result_num(r, "rel_err", isfinite(err) ? err : 1e30);
    drv_result_num(r, "tolerance", tol);
    char msg[200];
    if (err <= tol) snprintf(msg, sizeof msg, "%s: rel err %.2e <= %.0e", what, err, tol);
    else snprintf(msg, sizeof msg, "%s: rel err %s%.2e > %.0e (vs the serial block)", what,
                  isfinite(err) ? "" : "inf/NaN ", isfinite(err) ? err : 0.0, tol);
    drv_result_emit(r, err <= tol ? "pass" : "wrong", msg);
}

static void case_config(void) {
    if (!drv_case_begin("config.errors")) return;
    char bad[200] = "";
    mg_config c = config(false, g_T);
    if (mg_config_check(&c) != MG_OK) snprintf(bad, sizeof bad, "valid config rejected");
    c.hidden = g_H * 4 + 1;
    if (!bad[0] && mg_config_check(&c) != MG_ERR_SHAPE) snprintf(bad, sizeof bad, "hidden %% heads != 0 not reported as MG_ERR_SHAPE");
    if (g_tp > 1) {
        c = config(false, g_T);
        c.heads = g_tp + 1;
        c.hidden = c.heads * 4;
        if (!bad[0] && mg_config_check(&c) != MG_ERR_HEADS) snprintf(bad, sizeof bad, "heads %d at tp %d not reported as MG_ERR_HEADS", c.heads, g_tp);
        c = config(true, g_tp * 2 + 1);
        if (!bad[0] && mg_config_check(&c) != MG_ERR_SEQ) snprintf(bad, sizeof bad, "sp with seq %d at tp %d not reported as MG_ERR_SEQ", c.seq, g_tp);
        c = config(false, g_tp * 2 + 1);
        if (!bad[0] && mg_config_check(&c) != MG_OK) snprintf(bad, sizeof bad, "odd seq without sp rejected");
    }
    double nbad = drv_sum(bad[0] ? 1 : 0);
    drv_result *r = drv_result_new("config.errors", "config");
    drv_result_emit(r, nbad == 0 ? "pass" : "wrong", nbad == 0 ? "errors reported for bad shapes" : (bad[0] ? bad : "wrong on another rank"));
}

typedef struct {
    mg_config c;
    mg_params p, g;
    mg_acts *a;
    float *x, *y, *dx, *dy;
} block_run;

static void run_fwd_bwd(void *arg) {
    block_run *b = arg;
    mg_block_forward(&b->c, &b->p, b->a, b->y, b->x, NULL);
    mg_block_backward(&b->c, &b->p, &b->g, b->a, b->dx, b->dy, NULL);
}

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

static void case_block(bool sp) {
    const char *tag = sp ? "sp" : "nosp";
    char fname[64], bname[64], cname[64];
    snprintf(fname, sizeof fname, "forward.%s", tag);
    snprintf(bname, sizeof bname, "backward.%s", tag);
    snprintf(cname, sizeof cname, "comm.%s", tag);
    bool want_f = drv_case_begin(fname);
    block_run b;
    b.c = config(sp, seq_for(sp));
    if (mg_config_check(&b.c) != MG_OK) {
        if (want_f) drv_result_emit(drv_result_new(fname, sp ? "forward_sp" : "forward"), "error", "mg_config_check rejected a valid config");
        return;
    }
    int N = b.c.seq * b.c.batch, C = g_C, Nl = local_rows(&b.c);
    size_t NC = (size_t)N * C, NlC = (size_t)Nl * C;
    host_block hp, hg;
    host_block_alloc(&hp, &b.c, false);
    host_block_alloc(&hg, &b.c, true);
    host_block_master(&hp, &b.c, 0);
    float *hx = hz(NC), *hy = hz(NC), *hdy = hz(NC), *hdx = hz(NC), *got = hz(NC);
    pl_rng_fill_host(hx, N, C, C, 0, 0, g_seed, 7, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(hdy, N, C, C, 0, 0, g_seed, 8, PL_RNG_UNIFORM, -1, 1);
    host_acts ha;
    host_forward(&b.c, &hp, &ha, hy, hx);
    host_backward(&b.c, &hp, &hg, &ha, hdx, hdy);

    mg_params_alloc(&b.p, &b.c);
    mg_params_alloc(&b.g, &b.c);
    mg_params_init(&b.p, &b.c, 0, g_seed);
    pl_fill(b.g.base, 0, b.g.count, NULL);
    b.x = pl_malloc_floats(NlC); b.y = pl_malloc_floats(NlC);
    b.dx = pl_malloc_floats(NlC); b.dy = pl_malloc_floats(NlC);
    pl_upload(b.x, hx + row0(&b.c) * C, NlC * sizeof(float));
    pl_upload(b.dy, hdy + row0(&b.c) * C, NlC * sizeof(float));
    pl_poison(b.y, NlC, NULL);
    pl_poison(b.dx, NlC, NULL);
    b.a = mg_acts_alloc(&b.c);

    pl_metrics mf, mb;
    pl_device_sync();
    pl_metrics_reset();
    mg_block_forward(&b.c, &b.p, b.a, b.y, b.x, NULL);
    pl_device_sync();
    pl_metrics_get(&mf);
    pl_download(got, b.y, NlC * sizeof(float));
    double ef = rel_err(got, hy + row0(&b.c) * C, NlC);
    if (want_f) emit(fname, sp ? "forward_sp" : "forward", ef, g_tol, "block output");

    pl_metrics_reset();
    mg_block_backward(&b.c, &b.p, &b.g, b.a, b.dx, b.dy, NULL);
    pl_device_sync();
    pl_metrics_get(&mb);
    mg_sync_sp_grads(&b.c, &b.g, NULL);
    pl_device_sync();
    if (drv_case_begin(bname)) {
        pl_download(got, b.dx, NlC * sizeof(float));
        double e = rel_err(got, hdx + row0(&b.c) * C, NlC), worst = e;
        const char *worst_name = "dx";
        for (int w = 0; w < MG_NTENSORS; w++) {
            double ew = shard_err(&b.c, &b.g, &hg, (mg_tensor)w, NULL);
            if (!(ew <= worst)) worst = ew, worst_name = TNAME[w];
        }
        char what[64];
        snprintf(what, sizeof what, "dx and all gradient shards (worst: %s)", worst_name);
        emit(bname, sp ? "backward_sp" : "backward", worst, g_tol, what);
    }
    if (drv_case_begin(cname)) {
        double S = (double)NC * sizeof(float);
        char wf[256], wb[256];
        bool okf = sp ? counts_ok(&mf, 0, 2, 2, 4 * S, wf, sizeof wf) : counts_ok(&mf, 2, 0, 0, 2 * S, wf, sizeof wf);
        bool okb = sp ? counts_ok(&mb, 0, 4, 2, 6 * S, wb, sizeof wb) : counts_ok(&mb, 2, 0, 0, 2 * S, wb, sizeof wb);
        double bad = drv_sum(okf && okb ? 0 : 1);
        drv_result *r = drv_result_new(cname, sp ? "comm_sp" : "comm");
        drv_result_num(r, "coll_bytes_fwd", (double)mf.coll_bytes);
        drv_result_num(r, "coll_bytes_bwd", (double)mb.coll_bytes);
        drv_result_num(r, "lib_calls", (double)(mf.coll_total + mb.coll_total));
        char msg[600];
        snprintf(msg, sizeof msg, "forward: %s; backward: %s", wf, wb);
        drv_result_emit(r, bad == 0 ? "pass" : "wrong", msg);
    }

    /* performance lines: fwd+bwd time per rank, GEMM flops/s, time inside collectives */
    pl_metrics_reset();
    size_t first = pl_trace_count();
    pl_timing t = pl_time(run_fwd_bwd, &b, 1, g_iters, pl_comm_world());
    pl_metrics mt;
    pl_metrics_get(&mt);
    double comm = 0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = first; i < pl_trace_count(); i++)
        if (pl_op_is_collective(ev[i].kind)) comm += ev[i].t_end - ev[i].t_start;
    int runs = 1 + g_iters;
    double per_run_flops = mt.gemm_flops / runs, per_run_comm = comm / runs;
    double frac = drv_max(per_run_comm / (t.mean_us * 1e-6));
    drv_print("perf block fwd+bwd tp=%d sp=%d T=%d B=%d C=%d H=%d F=%d: %.1f us per rank (median), %.3f GFLOP/s per rank (GEMMs), comm fraction %.2f\n",
              g_tp, sp, b.c.seq, g_B, g_C, g_H, g_F, t.median_us, per_run_flops / (t.median_us * 1e-6) / 1e9, frac);

    mg_acts_free(b.a);
    pl_free(b.x); pl_free(b.y); pl_free(b.dx); pl_free(b.dy);
    mg_params_free(&b.p);
    mg_params_free(&b.g);
    host_acts_free(&ha);
    host_block_free(&hp);
    host_block_free(&hg);
    free(hx); free(hy); free(hdy); free(hdx); free(got);
}

/* Activation bytes of one block with and without sp: the layer-norm / residual regions
 * (block input, LN1 out, x1, LN2 out: 4 N C floats, plus 4 N means/rstds) must shrink by
 * the factor tp; everything else may stay. */
static void case_memory(void) {
    if (!drv_case_begin("memory.sp")) return;
    mg_config c0 = config(false, seq_for(true)), c1 = config(true, seq_for(true));
    size_t before = pl_mem_in_use();
    mg_acts *a0 = mg_acts_alloc(&c0);
    double bytes0 = (double)(pl_mem_in_use() - before);
    mg_acts_free(a0);
    before = pl_mem_in_use();
    mg_acts *a1 = mg_acts_alloc(&c1);
    double bytes1 = (double)(pl_mem_in_use() - before);
    mg_acts_free(a1);
    double N = (double)c0.seq * c0.batch;
    double region = (4 * N * g_C + 4 * N) * sizeof(float), want = region * (1 - 1.0 / g_tp);
    double saved = drv_min(bytes0 - bytes1);
    bool ok = bytes0 > 0 && saved >= want - 0.5;
    drv_result *r = drv_result_new("memory.sp", "memory_sp");
    drv_result_num(r, "act_bytes_nosp", drv_max(bytes0));
    drv_result_num(r, "act_bytes_sp", drv_max(bytes1));
    drv_result_num(r, "bytes_saved", saved);
    drv_result_num(r, "bytes_saved_expected", want);
    char msg[240];
    snprintf(msg, sizeof msg, "activations per rank %.0f B without sp, %.0f B with sp: saved %.0f B, LN/residual regions need %.0f B saved ((1 - 1/tp) x %.0f B)",
             drv_max(bytes0), drv_max(bytes1), saved, want, region);
    drv_print("memory block activations per rank tp=%d: %.0f B without sp, %.0f B with sp (ratio %.3f)\n", g_tp,
              drv_max(bytes0), drv_max(bytes1), bytes0 > 0 ? drv_max(bytes1) / drv_max(bytes0) : 0.0);
    drv_result_emit(r, ok ? "pass" : "wrong", msg);
}

static void case_train(bool sp) {
    char name[64];
    snprintf(name, sizeof name, "train.%s", sp ? "sp" : "nosp");
    if (!drv_case_begin(name)) return;
    mg_config c = config(sp, seq_for(sp));
    int L = g_L, N = c.seq * c.batch, C = g_C, Nl = local_rows(&c);
    size_t NC = (size_t)N * C, NlC = (size_t)Nl * C;
    const float lr = 0.5f;
    host_block *hp = calloc(L, sizeof *hp), *hg = calloc(L, sizeof *hg), *upd = calloc(L, sizeof *upd);
    host_acts *ha = calloc(L, sizeof *ha);
    float **hin = calloc(L + 1, sizeof *hin);
    float *tgt = hz(NC), *dcur = hz(NC), *dnext = hz(NC), *got = hz(NC);
    hin[0] = hz(NC);
    pl_rng_fill_host(hin[0], N, C, C, 0, 0, g_seed, 9, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(tgt, N, C, C, 0, 0, g_seed, 10, PL_RNG_UNIFORM, -1, 1);
    for (int l = 0; l < L; l++) {
        host_block_alloc(&hp[l], &c, false);
        host_block_alloc(&hg[l], &c, true);
        host_block_alloc(&upd[l], &c, true);
        host_block_master(&hp[l], &c, l);
        hin[l + 1] = hz(NC);
        host_forward(&c, &hp[l], &ha[l], hin[l + 1], hin[l]);
    }
    double loss_ref = 0;
    for (size_t i = 0; i < NC; i++) {
        double d = (double)hin[L][i] - tgt[i];
        loss_ref += 0.5 * d * d / (double)NC;
        dcur[i] = (float)(d / (double)NC);
    }
    for (int l = L - 1; l >= 0; l--) {
        host_backward(&c, &hp[l], &hg[l], &ha[l], dnext, dcur);
        float *t = dcur; dcur = dnext; dnext = t;
    }
    for (int l = 0; l < L; l++)
        for (int w = 0; w < MG_NTENSORS; w++)
            for (size_t i = 0; i < master_numel(&c, (mg_tensor)w); i++) upd[l].t[w][i] = -lr * hg[l].t[w][i];

    /* the student's stack: forward, the driver's loss, backward, one step */
    mg_params *p = calloc(L, sizeof *p), *g = calloc(L, sizeof *g);
    mg_acts **a = calloc(L, sizeof *a);
    for (int l = 0; l < L; l++) {
        mg_params_alloc(&p[l], &c);
        mg_params_alloc(&g[l], &c);
        mg_params_init(&p[l], &c, l, g_seed);
        pl_fill(g[l].base, 0, g[l].count, NULL);
        a[l] = mg_acts_alloc(&c);
    }
    float *x = pl_malloc_floats(NlC), *y = pl_malloc_floats(NlC), *dx = pl_malloc_floats(NlC), *dy = pl_malloc_floats(NlC);
    pl_upload(x, hin[0] + row0(&c) * C, NlC * sizeof(float));
    pl_poison(y, NlC, NULL);
    mg_stack_forward(&c, L, p, a, y, x, NULL);
    pl_device_sync();
    pl_download(got, y, NlC * sizeof(float));
    double part = 0;
    const float *t0 = tgt + row0(&c) * C;
    for (size_t i = 0; i < NlC; i++) {
        double d = (double)got[i] - t0[i];
        part += 0.5 * d * d / (double)NC;
        got[i] = (float)(d / (double)NC);
    }
    /* without sp every rank holds every row: count the loss once */
    double loss = sp ? drv_sum(part) : drv_max(part);
    pl_upload(dy, got, NlC * sizeof(float));
    mg_stack_backward(&c, L, p, g, a, dx, dy, NULL);
    mg_sgd_step(&c, L, p, g, lr, NULL);
    pl_device_sync();
    double eloss = isfinite(loss) ? fabs(loss - loss_ref) / fabs(loss_ref) : INFINITY, eupd = 0;
    for (int l = 0; l < L; l++)
        for (int w = 0; w < MG_NTENSORS; w++) {
            double e = shard_err(&c, &p[l], &upd[l], (mg_tensor)w, &hp[l]);
            if (!(e <= eupd)) eupd = e;
        }
    eupd = drv_max(eupd);
    double tol_upd = 1e-3; /* the update p_new - p_old loses digits to cancellation */
    drv_result *r = drv_result_new(name, sp ? "train_sp" : "train");
    drv_result_num(r, "loss", loss);
    drv_result_num(r, "loss_ref", loss_ref);
    drv_result_num(r, "update_rel_err", isfinite(eupd) ? eupd : 1e30);
    char msg[240];
    bool ok = eloss <= g_tol && eupd <= tol_upd;
    snprintf(msg, sizeof msg, "%d blocks, one SGD step: loss %.6g vs serial %.6g (rel %.1e <= %.0e), parameter update rel err %.1e <= %.0e",
             L, loss, loss_ref, eloss, g_tol, eupd, tol_upd);
    drv_result_emit(r, ok ? "pass" : "wrong", msg);

    for (int l = 0; l < L; l++) {
        mg_acts_free(a[l]);
        mg_params_free(&p[l]);
        mg_params_free(&g[l]);
        host_block_free(&hp[l]);
        host_block_free(&hg[l]);
        host_block_free(&upd[l]);
        host_acts_free(&ha[l]);
        free(hin[l + 1]);
    }
    pl_free(x); pl_free(y); pl_free(dx); pl_free(dy);
    free(hin[0]); free(hin); free(p); free(g); free(a); free(hp); free(hg); free(upd); free(ha);
    free(tgt); free(dcur); free(dnext); free(got);
}

/* ================================================================================== */
/* Cost-model prediction: the block's GEMMs and collectives at a realistic size        */
/* ================================================================================== */

/* One rank's ops of the block, forward then backward, as kernels/ and pl_gemm record them:
 * layernorm, QKV GEMM + bias, attention (2 batched GEMMs around a causal softmax), output
 * projection, reduction (all-reduce, or reduce-scatter with sp), bias, residual; then the
 * MLP the same way with GELU. Backward mirrors it with two GEMMs per weight and, with sp,
 * gathers twice (the gradient, and the input again for dW) and reduce-scatters once. */
typedef struct {
    plc_op *ops;
    size_t n;
    int rank, tp;
} block_ops;
static void add(block_ops *b, pl_op_kind kind, double flops, double bytes) {
    double t = 2.0 * (double)b->n;
    b->ops[b->n++] = (plc_op){.rank = b->rank, .kind = kind, .comm_id = b->tp > 1 ? 1 : 0, .comm_size = b->tp,
                              .peer = -1, .bytes = bytes, .flops = flops, .t_start = t, .t_end = t + 1};
}
static void add_gemm(block_ops *b, double m, double n, double k) {
    add(b, PL_OP_GEMM, 2 * m * n * k, 4 * (m * k + k * n + m * n));
}
#define ADD_KERNEL(b, cost_call)        \
    do {                                \
        double by_, fl_;                \
        cost_call;                      \
        add(b, PL_OP_KERNEL, fl_, by_); \
    } while (0)

static void block_rank_ops(block_ops *b, int T, int B, int C, int H, int F, int sp) {
    int tp = b->tp, N = T * B, Nl = sp ? N / tp : N, Cl = C / tp, Fl = F / tp, Hl = H / tp, hs = C / H;
    double S = 4.0 * N * C; /* the activation the block reduces or gathers */
    pl_op_kind reduce = sp ? PL_OP_REDUCE_SCATTER : PL_OP_ALLREDUCE;
    for (int pass = 0; pass < 2; pass++) {
        int bwd = pass;
        for (int half = 0; half < 2; half++) { /* attention, then MLP */
            ADD_KERNEL(b, kern_layernorm_cost(Nl, C, bwd, &by_, &fl_));
            if (tp > 1 && sp) add(b, PL_OP_ALLGATHER, 0, S);
            if (tp > 1 && sp && bwd) add(b, PL_OP_ALLGATHER, 0, S); /* the gathered input again, for dW */
            int width = half == 0 ? 3 * Cl : Fl;
            for (int g = 0; g <= bwd; g++) add_gemm(b, N, width, C); /* in-projection (+ its dW) */
            ADD_KERNEL(b, kern_bias_cost(N, width, bwd, &by_, &fl_));
            if (half == 0) {
                for (int g = 0; g < (bwd ? 4 : 2); g++) add(b, PL_OP_GEMM, 2.0 * B * Hl * T * (double)T * hs, 0);
                ADD_KERNEL(b, kern_softmax_cost(B * Hl, T, bwd, &by_, &fl_));
            } else {
                ADD_KERNEL(b, kern_gelu_cost((size_t)N * Fl, bwd, &by_, &fl_));
            }
            for (int g = 0; g <= bwd; g++) add_gemm(b, N, C, half == 0 ? Cl : Fl); /* out-projection */
            if (tp > 1) add(b, bwd && !sp ? PL_OP_ALLREDUCE : reduce, 0, S);
            ADD_KERNEL(b, kern_bias_cost(Nl, C, bwd, &by_, &fl_));
            ADD_KERNEL(b, kern_residual_cost((size_t)Nl * C, 0, &by_, &fl_));
        }
    }
}

static void print_prediction(void) {
    if (g_me != 0) return;
    plc_profile prof;
    char err[200];
    if (plc_profile_load(&prof, "dgx-h100", err, sizeof err) != 0) {
        drv_print("costmodel: dgx-h100 profile not available (%s)\n", err);
        return;
    }
    const int T = 1024, B = 8, C = 1024, H = 16, F = 4096;
    for (int tp = 1; tp <= 8; tp *= 2) {
        for (int sp = 0; sp <= 1; sp++) {
            block_ops b = {calloc((size_t)tp * 128, sizeof(plc_op)), 0, 0, tp};
            PL_CHECK(b.ops != NULL, "out of host memory");
            for (b.rank = 0; b.rank < tp; b.rank++) block_rank_ops(&b, T, B, C, H, F, sp);
            plc_prediction pr;
            if (plc_replay(&prof, b.ops, b.n, tp, &pr, err, sizeof err) == 0)
                drv_print("costmodel dgx-h100 block fwd+bwd (T=%d B=%d C=%d H=%d F=%d: GEMMs, kernels, collectives) tp=%d sp=%d: "
                          "%.1f us, comm fraction %.2f, %.1f TFLOP/s per GPU\n",
                          T, B, C, H, F, tp, sp, pr.step_time * 1e6, pr.comm_fraction, pr.flops / tp / pr.step_time / 1e12);
            else drv_print("costmodel: replay failed at tp=%d: %s\n", tp, err);
            free(b.ops);
        }
    }
}

int main(int argc, char **argv) {
    drv_opts o = {0};
    const drv_flag flags[] = {
        {"--seq", "sequence length T (odd is fine without sp; sp rounds it up to a multiple of tp)", &g_T, NULL},
        {"--batch", "batch B", &g_B, NULL},
        {"--hidden", "hidden size C", &g_C, NULL},
        {"--heads", "attention heads H (a multiple of the world size)", &g_H, NULL},
        {"--ffn", "MLP width F (a multiple of the world size)", &g_F, NULL},
        {"--layers", "blocks in the training-step stack", &g_L, NULL},
        {"--iters", "timed iterations of the performance lines", &g_iters, NULL},
        {NULL, NULL, NULL, NULL},
    };
    drv_init(&argc, &argv, "03-megatron", "[--seq T] [--batch B] [--hidden C] [--heads H] [--ffn F] [--layers L]", &o, flags);
    g_me = pl_rank();
    g_tp = pl_world();
    g_seed = pl_info()->seed;
    g_tol = pl_info()->device == PL_DEVICE_CUDA ? 5e-3 : 1e-5; /* TF32 GEMMs on a GPU */
    if (g_T < 1 || g_B < 1 || g_C < 1 || g_H < 1 || g_F < 1 || g_L < 1 || g_iters < 1)
        pl_usage_error("--seq, --batch, --hidden, --heads, --ffn, --layers and --iters must be >= 1");
    if (g_H % g_tp != 0) pl_usage_error("--heads %d is not a multiple of the tensor-parallel size %d", g_H, g_tp);
    if (g_C % g_H != 0) pl_usage_error("--hidden %d is not a multiple of --heads %d", g_C, g_H);
    if (g_F % g_tp != 0) pl_usage_error("--ffn %d is not a multiple of the tensor-parallel size %d", g_F, g_tp);
    if ((double)g_T * g_T * g_B * g_H > 64e6 || (double)g_T * g_B * g_F > 64e6)
        pl_usage_error("shape too large for the serial reference (T*T*B*H and T*B*F must stay below 64M)");
    case_config();
    case_block(false);
    case_block(true);
    case_memory();
    case_train(false);
    case_train(true);
    print_prediction();
    return drv_finish();
}
