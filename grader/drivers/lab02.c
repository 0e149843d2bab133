/* lab02.c - the driver of Lab 2 (tensor-parallel linear layers and MLP).
 *
 * Every rank builds the serial master tensors from the counter RNG (weights exactly as
 * tp_linear_init must, inputs and output gradients) and computes an independent serial
 * reference on the host in float64. It then calls the student's layer and checks:
 *   - the shard: bit-identical to the right slice of the master weight and bias;
 *   - outputs and gradients: relative Frobenius error <= 1e-5 (cpu, fp32 GEMM), or
 *     <= 5e-3 on cuda with PL_TF32=1 (TF32 tensor cores keep 10 mantissa bits);
 *   - the communication, from the instrumentation: the exact number, kind and size of
 *     collectives per forward and per backward, and no point-to-point traffic;
 *   - the work: GEMM flops per rank = serial flops / world size, exactly.
 * Scaling cases add the counted bytes against the formula and the cost model's predicted
 * efficiency (or, where every rank has its own GPU, the measured one).
 *
 * --bench T,D,FFN runs only a timed MLP step and prints one `scaling` line (make scaling).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"       // defines: drv_* (cases, results, flags)
#include "pl_costmodel.h" // defines: plc_profile, plc_replay, plc_replay_trace
#include "kern_bias.h"    // defines: kern_bias_cost (the ideal step's bias kernels)
#include "kern_gelu.h"    // defines: kern_gelu_cost
#include "tp_linear.h"    // defines: the lab API

enum { W_ID = 10, MLP_ID = 20, X_ID = 50, DY_ID = 51 };

static int g_n, g_me;
static uint64_t g_seed;
static pl_comm *g_comm;
static double g_tol = 1e-5;
static const char *g_tol_why = "fp32";
static plc_profile g_prof;
static int g_have_prof;

/* ---- host reference (float64) ---------------------------------------------------------- */

static float *master(int64_t rows, int64_t cols, uint64_t id, pl_rng_dist dist, float lo, float hi) {
    float *h = malloc((size_t)(rows * cols) * sizeof(float) + 4);
    PL_CHECK(h != NULL, "out of host memory");
    pl_rng_fill_host(h, rows, cols, cols, 0, 0, g_seed, id, dist, lo, hi);
    return h;
}
static float *zeros(int64_t n) {
    float *h = calloc((size_t)n + 1, sizeof(float));
    PL_CHECK(h != NULL, "out of host memory");
    return h;
}

/* y [T x out] = x [T x in] W^T (W [out x in]) + b */
static void ref_fwd(int64_t T, int64_t in, int64_t out, const float *x, const float *W, const float *b, float *y) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0;
            for (int64_t i = 0; i < in; i++) acc += (double)x[t * in + i] * W[o * in + i];
            y[t * out + o] = (float)acc;
        }
}
/* dx = dy W, dW = dy^T x, db = colsum dy */
static void ref_bwd(int64_t T, int64_t in, int64_t out, const float *x, const float *W, const float *dy,
                    float *dx, float *dW, float *db) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < in; i++) {
            double acc = 0;
            for (int64_t o = 0; o < out; o++) acc += (double)dy[t * out + o] * W[o * in + i];
            dx[t * in + i] = (float)acc;
        }
    for (int64_t o = 0; o < out; o++) {
        double s = 0;
        for (int64_t t = 0; t < T; t++) s += dy[t * out + o];
        if (db) db[o] = (float)s;
        for (int64_t i = 0; i < in; i++) {
            double acc = 0;
            for (int64_t t = 0; t < T; t++) acc += (double)dy[t * out + o] * x[t * in + i];
            dW[o * in + i] = (float)acc;
        }
    }
}
static double gelu_d(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad_d(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

/* Copy the block [r0, r0+rows) x [c0, c0+cols) of a [.. x ld] host matrix, optionally + add. */
static float *block(const float *m, int64_t ld, int64_t r0, int64_t rows, int64_t c0, int64_t cols, float add) {
    float *o = malloc((size_t)(rows * cols) * sizeof(float) + 4);
    PL_CHECK(o != NULL, "out of host memory");
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) o[i * cols + j] = m[(r0 + i) * ld + c0 + j] + add;
    return o;
}

/* ---- checks --------------------------------------------------------------------------- */

typedef struct {
    char msg[400];
    int bad;          /* a check failed */
    double worst_rel; /* worst relative error over tensors and ranks */
} verdict;

static void fail(verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(verdict *v, const char *fmt, ...) {
    if (v->bad) return; /* the first failure explains the case */
    v->bad = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->msg, sizeof v->msg, fmt, ap);
    va_end(ap);
}

/* Compare a device view with the expected host block on every rank; exact when exact. */
static void check_tensor(verdict *v, const char *what, pl_tensor got_dev, const float *exp, int exact) {
    size_t n = (size_t)pl_tensor_numel(got_dev);
    float *got = calloc(n + 1, sizeof(float));
    PL_CHECK(got != NULL, "out of host memory");
    if (n) pl_tensor_download(got, got_dev);
    pl_compare c = pl_compare_host(got, exp, n, 0.0);
    double rel = isnan(c.rel_fro) ? 1e30 : c.rel_fro;
    int nan_seen = 0;
    for (size_t i = 0; i < n; i++) nan_seen |= isnan(got[i]);
    free(got);
    double worst = drv_max(nan_seen ? 1e30 : rel), wrong_exact = drv_sum(exact ? (double)c.wrong : 0);
    if (worst > v->worst_rel) v->worst_rel = worst;
    if (exact && wrong_exact > 0)
        fail(v, "%s: %.0f element(s) differ from the master's slice (wrong rows/columns, or transposed?)", what,
             wrong_exact);
    else if (worst >= 1e30)
        fail(v, "%s: NaN (never written?)", what);
    else if (!(worst <= g_tol))
        fail(v, "%s: relative Frobenius error %.3g > tolerance %.0e", what, worst, g_tol);
}

typedef struct {
    int allreduce, allgather;   /* expected calls      */
    double bytes;               /* expected sum of S   */
    double flops;               /* expected per rank   */
} expect_t;

static void check_counts(verdict *v, drv_result *r, const pl_metrics *m, expect_t e, const char *phase) {
    double calls = drv_max((double)m->coll_total), calls_min = drv_min((double)m->coll_total);
    double ar = drv_max((double)m->coll_calls[PL_OP_ALLREDUCE]), ag = drv_max((double)m->coll_calls[PL_OP_ALLGATHER]);
    double bytes = drv_max((double)m->coll_bytes), p2p = drv_max((double)m->msgs_sent);
    double fl_err = drv_max(fabs(m->gemm_flops - e.flops)), fl_max = drv_max(m->gemm_flops);
    drv_result_num(r, "lib_calls", calls);
    drv_result_num(r, "coll_bytes", bytes);
    drv_result_num(r, "gemm_flops_per_rank", fl_max);
    drv_result_num(r, "gemm_flops_expected", e.flops);
    char what[64];
    snprintf(what, sizeof what, "%s", phase);
    /* One rank alone has nothing to communicate: calling the collectives or not is fine. */
    int skip_comm = g_n == 1 && (calls == 0 || calls == e.allreduce + e.allgather);
    if (p2p > 0) fail(v, "%s: used point-to-point sends (%.0f); use the library collectives", what, p2p);
    else if (!skip_comm && (calls != calls_min || ar != e.allreduce || ag != e.allgather || calls != e.allreduce + e.allgather)) {
        fail(v, "%s: %.0f all-reduce + %.0f all-gather (%.0f collectives in all), expected %d + %d",
             what, ar, ag, calls, e.allreduce, e.allgather);
    } else if (!skip_comm && bytes != e.bytes)
        fail(v, "%s: collectives moved S = %.0f bytes, expected %.0f", what, bytes, e.bytes);
    else if (fl_err > 0.5)
        fail(v, "%s: %.0f GEMM flops on the busiest rank, expected serial / world size = %.0f", what, fl_max, e.flops);
}

static void emit(drv_result *r, verdict *v) {
    drv_result_num(r, "rel_err", v->worst_rel);
    drv_result_num(r, "tolerance", g_tol);
    char ok[200];
    snprintf(ok, sizeof ok, "max rel. Frobenius error %.2e <= %.0e (%s)", v->worst_rel, g_tol, g_tol_why);
    drv_result_emit(r, v->bad ? "wrong" : "pass", v->bad ? v->msg : ok);
}

/* A device tensor [rows x cols] with ld = cols + pad, filled from block (r0, c0) of a
 * global master (global_cols wide). pad > 0 makes the input a strided view. */
static pl_tensor make_input(int64_t rows, int64_t cols, int64_t pad, int64_t global_cols, int64_t c0, uint64_t id) {
    float *buf = pl_malloc_floats((size_t)(rows * (cols + pad)) + 1);
    pl_tensor t = {buf, rows, cols, cols + pad};
    if (rows && cols) pl_rng_fill(t, global_cols, 0, c0, g_seed, id, PL_RNG_NORMAL, 0, 1);
    return t;
}
static pl_tensor make_output(int64_t rows, int64_t cols) {
    pl_tensor t = pl_tensor_view(pl_malloc_floats((size_t)(rows * cols) + 1), rows, cols);
    pl_poison(t.data, (size_t)(rows * cols), NULL);
    return t;
}

static int init_or_fail(drv_result *r, int rc, const char *what) {
    if (rc == TP_OK) return 1;
    char msg[200];
    snprintf(msg, sizeof msg, "%s returned %d (%s)", what, rc, tp_error_name(rc));
    drv_result_emit(r, "wrong", msg);
    return 0;
}

/* ---- linear layer cases ------------------------------------------------------------- */

typedef struct {
    int64_t T, in, out;
} shape;

static void linear_cases(tp_kind kind, bool flag, bool bias, shape sh) {
    const char *kname = kind == TP_COLUMN ? "column" : "row";
    const char *fname = kind == TP_COLUMN ? (flag ? "gather" : "split") : (flag ? "parallel" : "full");
    int64_t T = sh.T, in = sh.in, out = sh.out;
    float bound = tp_init_bound(in);
    float *W = master(out, in, W_ID, PL_RNG_UNIFORM, -bound, bound);
    float *b = master(1, out, W_ID + 1, PL_RNG_UNIFORM, -bound, bound);
    float *x = master(T, in, X_ID, PL_RNG_NORMAL, 0, 1);
    float *y = zeros(T * out);
    ref_fwd(T, in, out, x, W, bias ? b : NULL, y);
    int64_t ol = kind == TP_COLUMN ? out / g_n : out, il = kind == TP_ROW ? in / g_n : in;
    int64_t r0 = kind == TP_COLUMN ? g_me * ol : 0, c0 = kind == TP_ROW ? g_me * il : 0;
    double gemm = 2.0 * T * in * out / g_n;

    for (int phase = 0; phase < 2; phase++) {
        char name[160];
        snprintf(name, sizeof name, "%s.%s.%s%s.T%lld.in%lld.out%lld", kname, phase ? "bwd" : "fwd", fname,
                 bias ? "" : ".nobias", (long long)T, (long long)in, (long long)out);
        if (!drv_case_begin(name)) continue;
        char group[32];
        snprintf(group, sizeof group, "%s.%s", kname, phase ? "bwd" : "fwd");
        drv_result *r = drv_result_new(name, group);
        drv_result_num(r, "tokens", (double)T);
        tp_linear l;
        memset(&l, 0, sizeof l);
        if (!init_or_fail(r, tp_linear_init(&l, kind, in, out, bias, g_seed, W_ID, g_comm), "tp_linear_init")) {
            tp_linear_free(&l);
            continue;
        }
        verdict v = {.msg = ""};
        /* The shard must be the master's slice, bit for bit. */
        if (!pl_tensor_numel(l.w) || l.w.rows != ol || l.w.cols != il) {
            fail(&v, "shard w is [%lld x %lld], expected [%lld x %lld]", (long long)l.w.rows,
                 (long long)l.w.cols, (long long)ol, (long long)il);
        } else {
            float *ws = block(W, in, r0, ol, c0, il, 0);
            check_tensor(&v, "weight shard w", l.w, ws, 1);
            free(ws);
        }
        if (bias && !v.bad) {
            if (!l.b) fail(&v, "init: b is NULL although the layer has a bias");
            else {
                int64_t nb = kind == TP_COLUMN ? ol : out;
                float *bs = block(b, out, 0, 1, r0, nb, 0);
                check_tensor(&v, "bias shard b", pl_tensor_view(l.b, 1, nb), bs, 1);
                free(bs);
            }
        }
        if (v.bad) {
            emit(r, &v);
            tp_linear_free(&l);
            continue;
        }
        /* Inputs: strided views (ld > cols), as a real model would pass. */
        bool xpar = kind == TP_ROW && flag;
        pl_tensor dx_in = make_input(T, xpar ? il : in, 3, in, xpar ? c0 : 0, X_ID);
        pl_metrics m;
        if (phase == 0) {
            int64_t ycols = kind == TP_COLUMN && !flag ? ol : out;
            pl_tensor dy_out = make_output(T, ycols);
            pl_device_sync();
            pl_metrics_reset();
            int rc = kind == TP_COLUMN ? tp_column_forward(&l, dx_in, dy_out, flag, NULL)
                                       : tp_row_forward(&l, dx_in, dy_out, flag, NULL);
            pl_device_sync();
            pl_metrics_get(&m);
            if (rc != TP_OK) {
                init_or_fail(r, rc, kind == TP_COLUMN ? "tp_column_forward" : "tp_row_forward");
            } else {
                float *ye = block(y, out, 0, T, kind == TP_COLUMN && !flag ? r0 : 0, ycols, 0);
                check_tensor(&v, "y", dy_out, ye, 0);
                free(ye);
                expect_t e = {0, 0, 0, gemm};
                if (kind == TP_COLUMN && flag) e = (expect_t){0, 1, 4.0 * T * out, gemm};
                if (kind == TP_ROW) e = (expect_t){1, 0, 4.0 * T * out, gemm};
                check_counts(&v, r, &m, e, "forward");
                emit(r, &v);
            }
            pl_free(dy_out.data);
        } else {
            /* dy shaped like the forward output; gradients pre-filled to test +=. */
            int64_t ycols = kind == TP_COLUMN && !flag ? ol : out;
            float *dyh = master(T, out, DY_ID, PL_RNG_NORMAL, 0, 1);
            pl_tensor dy = make_input(T, ycols, 0, out, kind == TP_COLUMN && !flag ? r0 : 0, DY_ID);
            int64_t dxcols = xpar ? il : in;
            pl_tensor dx = make_output(T, dxcols);
            pl_fill(l.dw.data, 0.25f, (size_t)pl_tensor_numel(l.dw), NULL);
            if (l.db) pl_fill(l.db, 0.25f, (size_t)(kind == TP_COLUMN ? ol : out), NULL);
            float *dxr = zeros(T * in), *dWr = zeros(out * in), *dbr = zeros(out);
            ref_bwd(T, in, out, x, W, dyh, dxr, dWr, dbr);
            pl_device_sync();
            pl_metrics_reset();
            int rc = kind == TP_COLUMN ? tp_column_backward(&l, dx_in, dy, dx, flag, NULL)
                                       : tp_row_backward(&l, dx_in, dy, dx, flag, NULL);
            pl_device_sync();
            pl_metrics_get(&m);
            if (rc != TP_OK) {
                init_or_fail(r, rc, kind == TP_COLUMN ? "tp_column_backward" : "tp_row_backward");
            } else {
                float *e1 = block(dxr, in, 0, T, xpar ? c0 : 0, dxcols, 0);
                check_tensor(&v, "dx", dx, e1, 0);
                float *e2 = block(dWr, in, r0, ol, c0, il, 0.25f);
                check_tensor(&v, "dw (accumulated onto 0.25)", l.dw, e2, 0);
                free(e1);
                free(e2);
                if (bias) {
                    int64_t nb = kind == TP_COLUMN ? ol : out;
                    float *e3 = block(dbr, out, 0, 1, r0, nb, 0.25f);
                    check_tensor(&v, "db (accumulated onto 0.25)", pl_tensor_view(l.db, 1, nb), e3, 0);
                    free(e3);
                }
                expect_t e = {1, 0, 4.0 * T * in, 2 * gemm};
                if (kind == TP_ROW) e = flag ? (expect_t){0, 0, 0, 2 * gemm} : (expect_t){0, 1, 4.0 * T * in, 2 * gemm};
                check_counts(&v, r, &m, e, "backward");
                emit(r, &v);
            }
            free(dyh);
            free(dxr);
            free(dWr);
            free(dbr);
            pl_free(dy.data);
            pl_free(dx.data);
        }
        pl_free(dx_in.data);
        tp_linear_free(&l);
    }
    free(W);
    free(b);
    free(x);
    free(y);
}

/* ---- MLP --------------------------------------------------------------------------------- */

typedef struct {
    float *W1, *b1, *W2, *b2, *x, *h, *a, *y, *dy, *dx, *dW1, *db1, *dW2, *db2;
} mlp_ref;

static void mlp_reference(mlp_ref *R, int64_t T, int64_t d, int64_t f) {
    float b1 = tp_init_bound(d), b2 = tp_init_bound(f);
    R->W1 = master(f, d, MLP_ID, PL_RNG_UNIFORM, -b1, b1);
    R->b1 = master(1, f, MLP_ID + 1, PL_RNG_UNIFORM, -b1, b1);
    R->W2 = master(d, f, MLP_ID + 2, PL_RNG_UNIFORM, -b2, b2);
    R->b2 = master(1, d, MLP_ID + 3, PL_RNG_UNIFORM, -b2, b2);
    R->x = master(T, d, X_ID, PL_RNG_NORMAL, 0, 1);
    R->dy = master(T, d, DY_ID, PL_RNG_NORMAL, 0, 1);
    R->h = zeros(T * f), R->a = zeros(T * f), R->y = zeros(T * d);
    ref_fwd(T, d, f, R->x, R->W1, R->b1, R->h);
    for (int64_t i = 0; i < T * f; i++) R->a[i] = (float)gelu_d(R->h[i]);
    ref_fwd(T, f, d, R->a, R->W2, R->b2, R->y);
    float *da = zeros(T * f);
    R->dW2 = zeros(d * f), R->db2 = zeros(d), R->dW1 = zeros(f * d), R->db1 = zeros(f), R->dx = zeros(T * d);
    ref_bwd(T, f, d, R->a, R->W2, R->dy, da, R->dW2, R->db2);
    for (int64_t i = 0; i < T * f; i++) da[i] = (float)(da[i] * gelu_grad_d(R->h[i]));
    ref_bwd(T, d, f, R->x, R->W1, da, R->dx, R->dW1, R->db1);
    free(da);
}
static void mlp_ref_free(mlp_ref *R) {
    float **p[] = {&R->W1, &R->b1, &R->W2, &R->b2, &R->x, &R->h, &R->a, &R->y, &R->dy, &R->dx, &R->dW1, &R->db1, &R->dW2, &R->db2};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(*p[i]);
}

static void mlp_cases(int64_t T, int64_t d, int64_t f) {
    mlp_ref R;
    memset(&R, 0, sizeof R);
    int have_ref = 0;
    int64_t fl = f / g_n;
    double gemm = 2.0 * T * d * f / g_n;
    for (int phase = 0; phase < 2; phase++) {
        char name[128];
        snprintf(name, sizeof name, "mlp.%s.T%lld.d%lld.ffn%lld", phase ? "bwd" : "fwd", (long long)T, (long long)d, (long long)f);
        if (!drv_case_begin(name)) continue;
        if (!have_ref) mlp_reference(&R, T, d, f), have_ref = 1;
        drv_result *r = drv_result_new(name, phase ? "mlp.bwd" : "mlp.fwd");
        tp_mlp m;
        memset(&m, 0, sizeof m);
        if (!init_or_fail(r, tp_mlp_init(&m, d, f, T, g_seed, MLP_ID, g_comm), "tp_mlp_init")) {
            tp_mlp_free(&m);
            continue;
        }
        verdict v = {.msg = ""};
        pl_tensor x = make_input(T, d, 0, d, 0, X_ID), y = make_output(T, d);
        pl_metrics mt;
        pl_device_sync();
        pl_metrics_reset();
        int rc = tp_mlp_forward(&m, x, y, NULL);
        pl_device_sync();
        pl_metrics_get(&mt);
        if (rc != TP_OK) {
            init_or_fail(r, rc, "tp_mlp_forward");
        } else if (phase == 0) {
            check_tensor(&v, "y", y, R.y, 0);
            check_counts(&v, r, &mt, (expect_t){1, 0, 4.0 * T * d, 2 * gemm}, "forward");
            emit(r, &v);
        } else {
            pl_tensor dy = make_input(T, d, 0, d, 0, DY_ID), dx = make_output(T, d);
            pl_fill(m.fc1.dw.data, 0.25f, (size_t)pl_tensor_numel(m.fc1.dw), NULL);
            pl_fill(m.fc2.dw.data, 0.25f, (size_t)pl_tensor_numel(m.fc2.dw), NULL);
            pl_fill(m.fc1.db, 0.25f, (size_t)fl, NULL);
            pl_fill(m.fc2.db, 0.25f, (size_t)d, NULL);
            pl_device_sync();
            pl_metrics_reset();
            rc = tp_mlp_backward(&m, x, dy, dx, NULL);
            pl_device_sync();
            pl_metrics_get(&mt);
            if (rc != TP_OK) {
                init_or_fail(r, rc, "tp_mlp_backward");
            } else {
                check_tensor(&v, "dx", dx, R.dx, 0);
                float *e = block(R.dW1, d, g_me * fl, fl, 0, d, 0.25f);
                check_tensor(&v, "fc1 dw", m.fc1.dw, e, 0);
                free(e);
                e = block(R.db1, f, 0, 1, g_me * fl, fl, 0.25f);
                check_tensor(&v, "fc1 db", pl_tensor_view(m.fc1.db, 1, fl), e, 0);
                free(e);
                e = block(R.dW2, f, 0, d, g_me * fl, fl, 0.25f);
                check_tensor(&v, "fc2 dw", m.fc2.dw, e, 0);
                free(e);
                e = block(R.db2, d, 0, 1, 0, d, 0.25f);
                check_tensor(&v, "fc2 db", pl_tensor_view(m.fc2.db, 1, d), e, 0);
                free(e);
                check_counts(&v, r, &mt, (expect_t){1, 0, 4.0 * T * d, 4 * gemm}, "backward");
                emit(r, &v);
            }
            pl_free(dy.data);
            pl_free(dx.data);
        }
        pl_free(x.data);
        pl_free(y.data);
        tp_mlp_free(&m);
    }
    if (have_ref) mlp_ref_free(&R);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void error_case(const char *name, int expected, int which) {
    if (!drv_case_begin(name)) return;
    drv_result *r = drv_result_new(name, "errors");
    int64_t k = 8 * g_n;
    pl_device_sync();
    size_t mem0 = pl_mem_in_use();
    pl_metrics_reset();
    int rc = TP_OK;
    tp_linear l;
    tp_mlp m;
    memset(&l, 0, sizeof l);
    memset(&m, 0, sizeof m);
    if (which == 0) rc = tp_linear_init(&l, TP_COLUMN, k, k + 1, true, g_seed, W_ID, g_comm);
    if (which == 1) rc = tp_linear_init(&l, TP_ROW, k + 1, k, true, g_seed, W_ID, g_comm);
    if (which == 2) rc = tp_mlp_init(&m, k, k + 1, 4, g_seed, MLP_ID, g_comm);
    int mem_leak = pl_mem_in_use() != mem0;
    if (which == 3) { /* a y with one column too many */
        rc = tp_linear_init(&l, TP_ROW, k, k, true, g_seed, W_ID, g_comm);
        if (rc == TP_OK) {
            pl_tensor x = make_input(3, k / g_n, 0, k, 0, X_ID), y = make_output(3, k + 1);
            pl_device_sync();
            pl_metrics_reset();
            rc = tp_row_forward(&l, x, y, true, NULL);
            pl_free(x.data);
            pl_free(y.data);
        } else {
            rc = -rc - 100; /* init itself failed: report that */
        }
        mem_leak = 0;
    }
    pl_device_sync();
    pl_metrics m2;
    pl_metrics_get(&m2);
    double rcs_min = drv_min(rc), rcs_max = drv_max(rc), calls = drv_max((double)m2.coll_total + (double)m2.msgs_sent);
    double gemms = drv_max((double)m2.gemm_calls), leaks = drv_max(mem_leak);
    char msg[240];
    const char *verdict = "pass";
    if (rcs_min != expected || rcs_max != expected) {
        verdict = "wrong";
        int shown = rcs_max != expected ? (int)rcs_max : (int)rcs_min;
        if (shown <= -100) snprintf(msg, sizeof msg, "tp_linear_init of a valid layer returned %d (%s)", -shown - 100, tp_error_name(-shown - 100));
        else snprintf(msg, sizeof msg, "returned %d (%s), expected %d (%s)", shown, tp_error_name(shown), expected, tp_error_name(expected));
    } else if (calls > 0 || gemms > 0) {
        verdict = "wrong";
        snprintf(msg, sizeof msg, "returned the error but still communicated or computed (%.0f comm ops, %.0f GEMMs)", calls, gemms);
    } else if (leaks > 0) {
        verdict = "wrong";
        snprintf(msg, sizeof msg, "returned the error but left device memory allocated");
    } else {
        snprintf(msg, sizeof msg, "returned %d (%s) and did nothing else", expected, tp_error_name(expected));
    }
    drv_result_emit(r, verdict, msg);
    tp_linear_free(&l);
    tp_mlp_free(&m);
}

/* ---- scaling ------------------------------------------------------------------------------ */

/* The ideal Megatron MLP step (forward + backward) at world n, as recorded ops, per rank:
 * forward  fc1 GEMM, bias, GELU, fc2 GEMM, one all-reduce, bias once after it;
 * backward fc2 db, dW, dX GEMMs, GELU', fc1 db, dW, dX GEMMs, one all-reduce.
 * The kernels are counted as kernels/ records them (kern_*_cost). */
typedef struct {
    plc_op *ops;
    size_t n;
    int rank, size;
} op_list;
static void add_op(op_list *l, pl_op_kind kind, double flops, double bytes) {
    double t = (double)l->n;
    l->ops[l->n++] = (plc_op){.rank = l->rank, .kind = kind, .comm_size = l->size, .peer = -1,
                              .flops = flops, .bytes = bytes, .t_start = t, .t_end = t + 0.5};
}
static void add_gemm(op_list *l, double m, double n, double k) {
    add_op(l, PL_OP_GEMM, 2 * m * n * k, 4 * (m * k + k * n + m * n));
}
static void add_bias(op_list *l, double rows, double cols, int backward) {
    double bytes, flops;
    kern_bias_cost((int)rows, (int)cols, backward, &bytes, &flops);
    add_op(l, PL_OP_KERNEL, flops, bytes);
}
static void add_gelu(op_list *l, double count, int backward) {
    double bytes, flops;
    kern_gelu_cost((size_t)count, backward, &bytes, &flops);
    add_op(l, PL_OP_KERNEL, flops, bytes);
}

static double ideal_step(const plc_profile *p, int64_t T, int64_t d, int64_t f, int n, plc_prediction *pred) {
    enum { PER = 16 };
    op_list l = {calloc((size_t)PER * (size_t)n, sizeof(plc_op)), 0, 0, n};
    PL_CHECK(l.ops != NULL, "out of host memory");
    double fl = (double)f / n, S = 4.0 * T * d;
    for (l.rank = 0; l.rank < n; l.rank++) {
        add_gemm(&l, T, fl, d); /* forward */
        add_bias(&l, T, fl, 0);
        add_gelu(&l, T * fl, 0);
        add_gemm(&l, T, d, fl);
        add_op(&l, PL_OP_ALLREDUCE, 0, S);
        add_bias(&l, T, d, 0);
        add_bias(&l, T, d, 1); /* backward */
        add_gemm(&l, d, fl, T);
        add_gemm(&l, T, fl, d);
        add_gelu(&l, T * fl, 1);
        add_bias(&l, T, fl, 1);
        add_gemm(&l, fl, d, T);
        add_gemm(&l, T, d, fl);
        add_op(&l, PL_OP_ALLREDUCE, 0, S);
    }
    char err[200];
    plc_prediction tmp;
    if (!pred) pred = &tmp;
    int rc = plc_replay(p, l.ops, l.n, n, pred, err, sizeof err);
    free(l.ops);
    return rc == 0 ? pred->step_time : -1;
}

typedef struct {
    tp_mlp *m;
    pl_tensor x, y, dy, dx;
} step_arg;
static void mlp_step(void *arg) {
    step_arg *a = arg;
    tp_mlp_forward(a->m, a->x, a->y, NULL);
    tp_mlp_backward(a->m, a->x, a->dy, a->dx, NULL);
}

/* Ring-equivalent bytes sent per rank by the counted collectives (REFERENCE.md). */
static double ring_bytes(const pl_metrics *m, double S_allreduce_total, double S_gather_total) {
    (void)m;
    return 2.0 * (g_n - 1) / g_n * S_allreduce_total + (double)(g_n - 1) / g_n * S_gather_total;
}

/* The MLP step's work issued directly with library calls, for the measured speed basis:
 * forward X W1^T + b1, GELU, (.) W2^T, all-reduce, + b2; backward db2, dA, dW2, GELU',
 * db1, dX, dW1, all-reduce. Values are constants: only the time matters. */
typedef struct {
    int T, d, fl;
    float *X, *W1, *W2, *b1, *b2, *H, *A, *Y, *dY, *dA, *dH, *dX, *dW1, *dW2, *db1, *db2;
} ref_mlp;
/* Every buffer of the reference step with its size in floats, for allocation and freeing. */
static size_t ref_mlp_bufs(ref_mlp *m, float **slot[16], size_t size[16]) {
    size_t T = (size_t)m->T, d = (size_t)m->d, fl = (size_t)m->fl, n = 0;
    float **act_d[] = {&m->X, &m->Y, &m->dY, &m->dX}, **act_f[] = {&m->H, &m->A, &m->dA, &m->dH};
    float **wts[] = {&m->W1, &m->W2, &m->dW1, &m->dW2}, **vec_f[] = {&m->b1, &m->db1}, **vec_d[] = {&m->b2, &m->db2};
    for (int k = 0; k < 4; k++) slot[n] = act_d[k], size[n++] = T * d;
    for (int k = 0; k < 4; k++) slot[n] = act_f[k], size[n++] = T * fl;
    for (int k = 0; k < 4; k++) slot[n] = wts[k], size[n++] = fl * d;
    for (int k = 0; k < 2; k++) slot[n] = vec_f[k], size[n++] = fl;
    for (int k = 0; k < 2; k++) slot[n] = vec_d[k], size[n++] = d;
    return n;
}
static void ref_mlp_init(ref_mlp *m, int64_t T, int64_t d, int64_t fl) {
    m->T = (int)T, m->d = (int)d, m->fl = (int)fl;
    float **slot[16];
    size_t size[16], n = ref_mlp_bufs(m, slot, size);
    for (size_t i = 0; i < n; i++) {
        *slot[i] = pl_malloc_floats(size[i]);
        pl_fill(*slot[i], 0.01f, size[i], NULL);
    }
}
static void ref_mlp_free(ref_mlp *m) {
    float **slot[16];
    size_t size[16], n = ref_mlp_bufs(m, slot, size);
    for (size_t i = 0; i < n; i++) pl_free(*slot[i]);
}
static void ref_mlp_step(void *arg) {
    ref_mlp *m = arg;
    int T = m->T, d = m->d, fl = m->fl;
    pl_gemm(false, true, T, fl, d, 1, m->X, d, m->W1, d, 0, m->H, fl, NULL);
    kern_bias_forward(m->H, m->b1, T, fl, NULL);
    kern_gelu_forward(m->A, m->H, (size_t)T * fl, NULL);
    pl_gemm(false, true, T, d, fl, 1, m->A, fl, m->W2, fl, 0, m->Y, d, NULL);
    pl_allreduce(m->Y, m->Y, (size_t)T * d, PL_SUM, g_comm, NULL);
    kern_bias_forward(m->Y, m->b2, T, d, NULL);
    kern_bias_backward(m->db2, m->dY, T, d, NULL);
    pl_gemm(false, false, T, fl, d, 1, m->dY, d, m->W2, fl, 0, m->dA, fl, NULL);
    pl_gemm(true, false, d, fl, T, 1, m->dY, d, m->A, fl, 1, m->dW2, fl, NULL);
    kern_gelu_backward(m->dH, m->dA, m->H, (size_t)T * fl, NULL);
    kern_bias_backward(m->db1, m->dH, T, fl, NULL);
    pl_gemm(false, false, T, d, fl, 1, m->dH, fl, m->W1, d, 0, m->dX, d, NULL);
    pl_gemm(true, false, fl, d, T, 1, m->dH, fl, m->X, d, 1, m->dW1, d, NULL);
    pl_allreduce(m->dX, m->dX, (size_t)T * d, PL_SUM, g_comm, NULL);
}

static void scaling_case(int64_t T, int64_t d, int64_t f) {
    char name[128];
    snprintf(name, sizeof name, "scaling.mlp.T%lld.d%lld.ffn%lld", (long long)T, (long long)d, (long long)f);
    if (!drv_case_begin(name)) return;
    drv_result *r = drv_result_new(name, "scaling");
    tp_mlp m;
    memset(&m, 0, sizeof m);
    if (!init_or_fail(r, tp_mlp_init(&m, d, f, T, g_seed, MLP_ID, g_comm), "tp_mlp_init")) {
        tp_mlp_free(&m);
        return;
    }
    step_arg a = {&m, make_input(T, d, 0, d, 0, X_ID), make_output(T, d), make_input(T, d, 0, d, 0, DY_ID), make_output(T, d)};
    pl_device_sync();
    pl_metrics_reset();
    size_t first = pl_trace_count();
    mlp_step(&a);
    pl_device_sync();
    pl_metrics mt;
    pl_metrics_get(&mt);
    /* Counted: S per collective kind, summed (the all-reduce kind dominates here). */
    double calls = drv_max((double)mt.coll_total), S = drv_max((double)mt.coll_bytes);
    double ag = drv_max((double)mt.coll_calls[PL_OP_ALLGATHER]), ar = drv_max((double)mt.coll_calls[PL_OP_ALLREDUCE]);
    double S_ar = ar > 0 ? S * ar / (ar + ag) : 0, S_ag = S - S_ar; /* split is exact when one kind */
    double measured = ring_bytes(&mt, S_ar, S_ag) + drv_max((double)mt.bytes_sent);
    double optimal = 2 * (2.0 * (g_n - 1) / g_n * 4.0 * T * d);
    drv_result_num(r, "bytes", 4.0 * T * d);
    drv_result_num(r, "bytes_per_rank", measured);
    drv_result_num(r, "bytes_optimal", optimal);
    drv_result_num(r, "bytes_ratio", measured > 0 ? optimal / measured : (optimal > 0 ? 0 : 1));
    drv_result_num(r, "lib_calls", calls);
    char msg[300];
    const char *verdict = "pass";
    const pl_runtime_info *in = pl_info();
    int own_gpu = in->device == PL_DEVICE_CUDA && in->comm == PL_COMM_NCCL;
    if (own_gpu) {
        /* Measured: the student's step against the same work issued directly (its GEMMs,
         * bias, GELU and all-reduces, no views or checks), both timed the same way. */
        pl_timing ts = pl_time(mlp_step, &a, 3, 15, g_comm);
        drv_result_num(r, "time_us", ts.median_us);
        ref_mlp ref;
        ref_mlp_init(&ref, T, d, f / g_n);
        pl_timing tr = pl_time(ref_mlp_step, &ref, 3, 15, g_comm);
        ref_mlp_free(&ref);
        double t0 = tr.median_us * 1e-6;
        double ratio = ts.median_us > 0 ? t0 * 1e6 / ts.median_us : 0;
        drv_result_num(r, "speed_ratio", ratio);
        snprintf(msg, sizeof msg, "basis: measured (a GPU per rank): step %.1f us vs %.1f us for the same GEMMs, kernels and all-reduces (ratio %.2f); counted bytes %.0f vs optimal %.0f",
                 ts.median_us, t0 * 1e6, ratio, measured, optimal);
    } else if (g_have_prof) {
        plc_prediction ps, pi;
        char err[200] = "";
        int rc = plc_replay_trace(&g_prof, first, g_comm, &ps, err, sizeof err);
        double ideal = ideal_step(&g_prof, T, d, f, g_n, &pi);
        if (rc != 0 || ideal < 0) {
            verdict = "error";
            snprintf(msg, sizeof msg, "cost model could not replay the step: %s", err);
        } else {
            double ratio = ps.step_time > 0 ? ideal / ps.step_time : 0;
            drv_result_num(r, "pred_time_us", ps.step_time * 1e6);
            drv_result_num(r, "pred_ideal_us", ideal * 1e6);
            drv_result_num(r, "pred_comm_fraction", ps.comm_fraction);
            drv_result_num(r, "speed_ratio", ratio > 1 ? 1 : ratio);
            snprintf(msg, sizeof msg, "basis: counted bytes + predicted (profile %s; no GPU per rank): bytes/rank %.0f vs optimal %.0f; predicted step %.1f us vs ideal %.1f us, comm %.0f%%",
                     g_prof.name, measured, optimal, ps.step_time * 1e6, ideal * 1e6, 100 * ps.comm_fraction);
        }
    } else {
        verdict = "error";
        snprintf(msg, sizeof msg, "no cost-model profile (--profile NAME): cannot predict");
    }
    /* The step itself must be right in its communication: exactly one all-reduce each way. */
    if (!strcmp(verdict, "pass") && g_n > 1 && (ar != 2 || ag != 0 || calls != 2)) {
        verdict = "wrong";
        snprintf(msg, sizeof msg, "the MLP step issued %.0f all-reduce + %.0f all-gather (%.0f collectives), expected 2 + 0", ar, ag, calls);
    }
    drv_result_emit(r, verdict, msg);
    pl_free(a.x.data);
    pl_free(a.y.data);
    pl_free(a.dy.data);
    pl_free(a.dx.data);
    tp_mlp_free(&m);
}

/* The all-reduces and all-gathers recorded in trace[first, last) issued again on g_comm
 * with the same sizes, timed together (median of 5): the step's communication time where
 * the trace cannot tell it (a GPU). */
typedef struct {
    int n;
    pl_op_kind kind[16];
    size_t count[16]; /* floats: the all-reduce's buffer, the all-gather's output */
    float *buf, *send;
} coll_replay;
static void coll_replay_run(void *arg) {
    const coll_replay *c = arg;
    for (int i = 0; i < c->n; i++) {
        if (c->kind[i] == PL_OP_ALLREDUCE) pl_allreduce(c->buf, c->buf, c->count[i], PL_SUM, g_comm, NULL);
        else pl_allgather(c->send, c->buf, c->count[i] / (size_t)g_n, g_comm, NULL);
    }
}
static double collectives_alone_s(size_t first, size_t last) {
    coll_replay c = {0};
    const pl_trace_event *ev = pl_trace_events();
    size_t most = 1;
    for (size_t i = first; i < last && c.n < 16; i++)
        if (ev[i].kind == PL_OP_ALLREDUCE || ev[i].kind == PL_OP_ALLGATHER) {
            c.kind[c.n] = ev[i].kind;
            c.count[c.n] = (size_t)(ev[i].bytes / 4);
            if (c.count[c.n] > most) most = c.count[c.n];
            c.n++;
        }
    if (c.n == 0) return 0;
    c.buf = pl_malloc_floats(most);
    c.send = pl_malloc_floats(most);
    pl_fill(c.buf, 1.0f, most, NULL);
    pl_fill(c.send, 1.0f, most, NULL);
    pl_timing t = pl_time(coll_replay_run, &c, 1, 5, g_comm);
    pl_free(c.buf);
    pl_free(c.send);
    return t.median_us * 1e-6;
}

/* make scaling: one timed MLP step, measured and predicted, as one line on stdout. */
static int bench(const char *spec, const drv_opts *o, const char *this_profile) {
    long long T, d, f;
    if (sscanf(spec, "%lld,%lld,%lld", &T, &d, &f) != 3 || T < 1 || d < 1 || f < 1)
        pl_usage_error("--bench wants T,D,FFN (positive integers), got '%s'", spec);
    if (f % g_n) pl_usage_error("--bench: ffn %lld is not divisible by %d ranks", f, g_n);
    tp_mlp m;
    memset(&m, 0, sizeof m);
    int rc = tp_mlp_init(&m, d, f, T, g_seed, MLP_ID, g_comm);
    if (rc != TP_OK) pl_usage_error("tp_mlp_init returned %s", tp_error_name(rc));
    step_arg a = {&m, make_input(T, d, 0, d, 0, X_ID), make_output(T, d), make_input(T, d, 0, d, 0, DY_ID), make_output(T, d)};
    int iters = o->iters > 0 ? o->iters : 5, warm = o->warmup >= 0 ? o->warmup : 1;
    pl_timing t = pl_time(mlp_step, &a, warm, iters, g_comm);
    /* One more step, recorded, for the replay and the counted comm time. */
    pl_device_sync();
    pl_barrier(g_comm);
    pl_metrics_reset();
    size_t first = pl_trace_count();
    mlp_step(&a);
    pl_device_sync();
    pl_metrics mt;
    pl_metrics_get(&mt);
    double comm_s = 0, gemm_s = 0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = first; i < pl_trace_count(); i++) {
        double dt = ev[i].t_end - ev[i].t_start;
        if (ev[i].kind == PL_OP_GEMM) gemm_s += dt;
        else if (ev[i].kind < PL_OP_GEMM) comm_s += dt; /* sends, receives, collectives */
    }
    comm_s = drv_max(comm_s);
    gemm_s = drv_max(gemm_s);
    /* On a GPU the trace holds issue times, not run times: time the step's collectives
     * again, alone and back to back, and take the rest of the step as computation. */
    if (pl_info()->device == PL_DEVICE_CUDA) {
        comm_s = collectives_alone_s(first, pl_trace_count());
        gemm_s = t.median_us * 1e-6 - comm_s;
    }
    double flops = drv_max(mt.gemm_flops);
    plc_prediction pp = {0}, pt = {0};
    char err[200] = "";
    double pred = -1, pred_this = -1, ideal = -1;
    if (g_have_prof && plc_replay_trace(&g_prof, first, g_comm, &pp, err, sizeof err) == 0) pred = pp.step_time;
    plc_profile tp;
    if (this_profile && plc_profile_load(&tp, this_profile, err, sizeof err) == 0 &&
        plc_replay_trace(&tp, first, g_comm, &pt, err, sizeof err) == 0)
        pred_this = pt.step_time;
    if (g_have_prof) ideal = ideal_step(&g_prof, T, d, f, g_n, NULL);
    drv_print("scaling np=%d T=%lld d=%lld ffn=%lld time_us=%.1f min_us=%.1f flops_per_rank=%.0f comm_frac=%.4f "
              "gemm_us=%.1f pred_us=%.3f pred_comm_frac=%.4f ideal_us=%.3f pred_this_us=%.1f pred_this_comm_frac=%.4f profile=%s device=%s\n",
              g_n, T, d, f, t.median_us, t.min_us, flops, t.median_us > 0 ? comm_s * 1e6 / t.median_us : 0,
              gemm_s * 1e6, pred * 1e6, pp.comm_fraction, ideal * 1e6, pred_this * 1e6, pt.comm_fraction,
              g_have_prof ? g_prof.name : "-", pl_device_name(pl_info()->device));
    pl_free(a.x.data);
    pl_free(a.y.data);
    pl_free(a.dy.data);
    pl_free(a.dx.data);
    tp_mlp_free(&m);
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* make bench: the column layer's forward (no bias, no gather: one GEMM per rank) against
 * an unsharded pl_gemm of the same per-rank shape, interleaved, on every rank. */
static void bench_gemm(const char *spec, int iters) {
    long long T, in, out;
    if (sscanf(spec, "%lld,%lld,%lld", &T, &in, &out) != 3 || T < 1 || in < 1 || out < 1)
        pl_usage_error("--bench-gemm wants T,IN,OUT, got '%s'", spec);
    tp_linear l;
    memset(&l, 0, sizeof l);
    int rc = tp_linear_init(&l, TP_COLUMN, in, out, false, g_seed, W_ID, g_comm);
    if (rc != TP_OK) pl_usage_error("tp_linear_init returned %s", tp_error_name(rc));
    int64_t ol = out / g_n;
    pl_tensor x = make_input(T, in, 0, in, 0, X_ID), y = make_output(T, ol);
    float *y2 = pl_malloc_floats((size_t)(T * ol));
    if (iters < 3) iters = 9;
    double *ta = calloc((size_t)iters, sizeof *ta), *tb = calloc((size_t)iters, sizeof *tb);
    for (int i = -1; i < iters; i++) {
        pl_device_sync();
        double t0 = pl_now();
        tp_column_forward(&l, x, y, false, NULL);
        pl_device_sync();
        double t1 = pl_now();
        pl_gemm(false, true, (int)T, (int)ol, (int)in, 1, x.data, (int)x.ld, l.w.data, (int)l.w.ld, 0, y2, (int)ol, NULL);
        pl_device_sync();
        double t2 = pl_now();
        if (i >= 0) ta[i] = drv_max(t1 - t0), tb[i] = drv_max(t2 - t1);
    }
    qsort(ta, (size_t)iters, sizeof *ta, cmp_d);
    qsort(tb, (size_t)iters, sizeof *tb, cmp_d);
    double a = ta[iters / 2], b = tb[iters / 2];
    drv_print("ratio tp column forward %lldx%lldx%lld at np %d (per rank %lldx%lldx%lld): pl_gemm / sharded layer  %6.3f   (layer %.1f us, pl_gemm %.1f us, target >= 0.9)\n",
              T, in, out, g_n, T, in, (long long)ol, a > 0 ? b / a : 0, a * 1e6, b * 1e6);
    free(ta);
    free(tb);
    pl_free(y2);
    pl_free(x.data);
    pl_free(y.data);
    tp_linear_free(&l);
}

/* Predicted strong and weak scaling of the ideal MLP step on a profile (no run needed). */
static void predict_table(const char *spec) {
    long long T, d, f;
    if (sscanf(spec, "%lld,%lld,%lld", &T, &d, &f) != 3 || T < 1 || d < 1 || f < 1)
        pl_usage_error("--predict wants T,D,FFN, got '%s'", spec);
    int maxn = g_prof.gpus_per_node * g_prof.nodes;
    double t1 = ideal_step(&g_prof, T, d, f, 1, NULL);
    for (int n = 1; n <= maxn && n <= 64; n *= 2) {
        if (f % n) continue;
        plc_prediction ps, pw;
        double ts = ideal_step(&g_prof, T, d, f, n, &ps), tw = ideal_step(&g_prof, T, d, f * n, n, &pw);
        drv_print("predict profile=%s np=%d strong_us=%.3f strong_eff=%.4f strong_comm_frac=%.4f weak_us=%.3f weak_eff=%.4f weak_comm_frac=%.4f\n",
                  g_prof.name, n, ts * 1e6, t1 / (n * ts), ps.comm_fraction, tw * 1e6, t1 / tw, pw.comm_fraction);
    }
}

int main(int argc, char **argv) {
    drv_opts o = {.warmup = -1};
    const char *shapes = "full", *profile = "dgx-h100", *bench_spec = NULL, *predict_spec = NULL, *this_prof = NULL,
               *bench_gemm_spec = NULL;
    drv_flag extra[] = {
        {"--shapes", "small|full: the case sizes (default full)", NULL, &shapes},
        {"--profile", "NAME|FILE: cost-model profile for predictions (default dgx-h100)", NULL, &profile},
        {"--bench", "T,D,FFN: only time one MLP step and print a `scaling` line", NULL, &bench_spec},
        {"--this-profile", "NAME|FILE: also predict --bench with this profile (validation)", NULL, &this_prof},
        {"--bench-gemm", "T,IN,OUT: time the column layer against pl_gemm of its per-rank shape", NULL, &bench_gemm_spec},
        {"--predict", "T,D,FFN: print the profile's predicted scaling of the ideal step and exit", NULL, &predict_spec},
        {NULL, NULL, NULL, NULL}};
    drv_init(&argc, &argv, "lab02", "Lab 2: tensor-parallel linear layers and MLP", &o, extra);
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    g_seed = pl_info()->seed;
    const char *tf32 = getenv("PL_TF32");
    if (pl_info()->device == PL_DEVICE_CUDA && tf32 && !strcmp(tf32, "1")) g_tol = 5e-3, g_tol_why = "TF32";
    char err[256];
    g_have_prof = plc_profile_load(&g_prof, profile, err, sizeof err) == 0;
    if (!g_have_prof && (bench_spec || predict_spec)) pl_usage_error("--profile: %s", err);
    if (predict_spec) {
        predict_table(predict_spec);
        return drv_finish();
    }
    if (bench_gemm_spec) {
        bench_gemm(bench_gemm_spec, o.iters);
        return drv_finish();
    }
    if (bench_spec) {
        bench(bench_spec, &o, this_prof);
        return drv_finish();
    }
    int small = !strcmp(shapes, "small");
    if (!small && strcmp(shapes, "full")) pl_usage_error("--shapes: expected small or full, got '%s'", shapes);

    /* in/out multiples of 8 divide by 1, 2, 4, 8 ranks; odd token counts and 1 token. */
    shape sm[] = {{1, 16, 24}, {7, 32, 16}, {33, 24, 40}};
    shape fu[] = {{1, 16, 24}, {7, 32, 16}, {33, 24, 40}, {129, 128, 96}, {256, 512, 384}};
    shape *sh = small ? sm : fu;
    size_t ns = small ? 3 : 5;
    drv_print("# lab02: %d rank(s), device %s, comm %s, tolerance %.0e (%s)\n", g_n,
              pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm), g_tol, g_tol_why);
    for (size_t i = 0; i < ns; i++) {
        linear_cases(TP_COLUMN, false, true, sh[i]);
        linear_cases(TP_COLUMN, true, true, sh[i]);
        linear_cases(TP_ROW, true, true, sh[i]);
        linear_cases(TP_ROW, false, true, sh[i]);
    }
    linear_cases(TP_COLUMN, true, false, sh[1]);
    linear_cases(TP_ROW, false, false, sh[1]);
    mlp_cases(5, 16, 64);
    mlp_cases(small ? 17 : 64, small ? 32 : 128, small ? 64 : 512);
    if (g_n > 1) {
        error_case("error.not_divisible.column", TP_ERR_NOT_DIVISIBLE, 0);
        error_case("error.not_divisible.row", TP_ERR_NOT_DIVISIBLE, 1);
        error_case("error.not_divisible.mlp", TP_ERR_NOT_DIVISIBLE, 2);
    }
    error_case("error.shape.row_forward", TP_ERR_SHAPE, 3);
    /* A GPU per rank measures: a shape where the GEMMs, not the launches, take the time. */
    if (pl_info()->device == PL_DEVICE_CUDA && pl_info()->comm == PL_COMM_NCCL && !small)
        scaling_case(1024, 1024, 4096);
    else
        scaling_case(small ? 16 : 64, small ? 64 : 256, small ? 256 : 1024);
    int failed = drv_cases_failed(), run = drv_cases_run();
    drv_print("# %d case(s), %d failed\n", run, failed);
    return drv_finish();
}
