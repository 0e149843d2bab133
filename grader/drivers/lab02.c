/* lab02.c - the driver of Lab 2 (tensor-parallel linear layers and MLP).
 *
 * Every rank builds the serial master tensors from the counter RNG (weights exactly as
 * tp_linear_init must, inputs and output gradients) and computes an independent serial
 * reference on the host in float64. It then calls the student's layer and checks:
 *   - the shard: bit-identical to the right slice of the master weight and bias;
 *   - outputs and gradients: relative Frobenius error within the harness's tolerance
 *     (1e-5 with fp32 GEMMs, 5e-3 with TF32: drv_tolerance);
 *   - the communication, from the instrumentation: the exact number, kind and size of
 *     collectives per forward and per backward, and no point-to-point traffic;
 *   - the work: GEMM flops per rank = serial flops / world size, exactly.
 * The scaling case adds the counted bytes against the formula and the cost model's
 * predicted efficiency (or, where every rank has its own GPU, the measured one).
 * Modes: --run bench (make bench LAB=2), --run scaling (make scaling LAB=2).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h" // defines: the tensor ids, what lab02_perf.c shares; brings in driver.h, tp_linear.h

int g_n, g_me;
uint64_t g_seed;
pl_comm *g_comm;
static const char *g_profile = "dgx-h100";
const char *g_shapes = "full", *g_this_profile, *g_shape, *g_gemm_shape;
plc_profile g_prof;
bool g_have_prof;

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
/* The block [r0, r0+rows) x [c0, c0+cols) of a [.. x ld] host matrix, + add. */
static float *block(const float *m, int64_t ld, int64_t r0, int64_t rows, int64_t c0, int64_t cols, float add) {
    float *o = malloc((size_t)(rows * cols) * sizeof(float) + 4);
    PL_CHECK(o != NULL, "out of host memory");
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) o[i * cols + j] = m[(r0 + i) * ld + c0 + j] + add;
    return o;
}
static void check_block(drv_case *c, const char *what, pl_tensor got, const float *m, int64_t ld, int64_t r0,
                        int64_t c0, float add, bool exact) {
    float *e = block(m, ld, r0, got.rows, c0, got.cols, add);
    drv_check_tensor(c, what, got, e, exact);
    free(e);
}

/* A device tensor [rows x cols] with ld = cols + pad, filled from block (0, c0) of a global
 * master (global_cols wide). pad > 0 makes the input a strided view. */
pl_tensor make_input(int64_t rows, int64_t cols, int64_t pad, int64_t global_cols, int64_t c0, uint64_t id) {
    pl_tensor t = {pl_malloc_floats((size_t)(rows * (cols + pad)) + 1), rows, cols, cols + pad};
    if (rows && cols) pl_rng_fill(t, global_cols, 0, c0, g_seed, id, PL_RNG_NORMAL, 0, 1);
    return t;
}
pl_tensor make_output(int64_t rows, int64_t cols) {
    return pl_tensor_view(drv_poisoned((size_t)(rows * cols)), rows, cols);
}
bool api_ok(drv_case *c, int rc, const char *what) { return drv_all_ok(c, rc, what, tp_error_name); }

/* ---- linear layers: arg = kind, flag (gather / input parallel), bias, backward, T, in, out ---- */

typedef struct {
    tp_linear l;
    float *W, *b, *x;
    pl_tensor xin, y, dy, dx;
    int64_t ol, il, r0, c0;
    int rc;
} lin;

#define L_KIND(c) ((tp_kind)(c)->arg[0])
#define L_FLAG(c) ((bool)(c)->arg[1])
#define L_BIAS(c) ((bool)(c)->arg[2])
#define L_BWD(c) ((bool)(c)->arg[3])

static void lin_setup(drv_case *c) {
    lin *s = drv_state(c, sizeof *s);
    int64_t T = c->arg[4], in = c->arg[5], out = c->arg[6];
    bool col = L_KIND(c) == TP_COLUMN, xpar = !col && L_FLAG(c), ysplit = col && !L_FLAG(c);
    float bound = tp_init_bound(in);
    s->W = master(out, in, W_ID, PL_RNG_UNIFORM, -bound, bound);
    s->b = master(1, out, W_ID + 1, PL_RNG_UNIFORM, -bound, bound);
    s->x = master(T, in, X_ID, PL_RNG_NORMAL, 0, 1);
    s->ol = col ? out / g_n : out, s->il = col ? in : in / g_n;
    s->r0 = col ? g_me * s->ol : 0, s->c0 = col ? 0 : g_me * s->il;
    if (!api_ok(c, tp_linear_init(&s->l, L_KIND(c), in, out, L_BIAS(c), g_seed, W_ID, g_comm), "tp_linear_init"))
        return;
    /* The shard must be the master's slice, bit for bit. */
    bool shape = s->l.w.rows == s->ol && s->l.w.cols == s->il && s->l.w.data;
    if (drv_min(shape) == 0) {
        drv_fail(c, "shard w is [%lld x %lld], expected [%lld x %lld]", (long long)s->l.w.rows,
                 (long long)s->l.w.cols, (long long)s->ol, (long long)s->il);
        return;
    }
    check_block(c, "weight shard w", s->l.w, s->W, in, s->r0, s->c0, 0, true);
    if (L_BIAS(c) && drv_min(s->l.b != NULL) == 0) drv_fail(c, "init: b is NULL although the layer has a bias");
    else if (L_BIAS(c)) check_block(c, "bias shard b", pl_tensor_view(s->l.b, 1, col ? s->ol : out), s->b, out, 0, s->r0, 0, true);
    /* Inputs: strided views (ld > cols), as a real model would pass. */
    s->xin = make_input(T, xpar ? s->il : in, 3, in, xpar ? s->c0 : 0, X_ID);
    int64_t ycols = ysplit ? s->ol : out;
    if (!L_BWD(c)) {
        s->y = make_output(T, ycols);
        return;
    }
    s->dy = make_input(T, ycols, 0, out, ysplit ? s->r0 : 0, DY_ID);
    s->dx = make_output(T, xpar ? s->il : in);
    pl_fill(s->l.dw.data, 0.25f, (size_t)pl_tensor_numel(s->l.dw), NULL); /* gradients accumulate */
    if (s->l.db) pl_fill(s->l.db, 0.25f, (size_t)(col ? s->ol : out), NULL);
}

static void lin_run(drv_case *c) {
    lin *s = c->state;
    bool col = L_KIND(c) == TP_COLUMN;
    if (!L_BWD(c)) s->rc = col ? tp_column_forward(&s->l, s->xin, s->y, L_FLAG(c), NULL)
                               : tp_row_forward(&s->l, s->xin, s->y, L_FLAG(c), NULL);
    else s->rc = col ? tp_column_backward(&s->l, s->xin, s->dy, s->dx, L_FLAG(c), NULL)
                     : tp_row_backward(&s->l, s->xin, s->dy, s->dx, L_FLAG(c), NULL);
}

static void lin_check(drv_case *c) {
    lin *s = c->state;
    bool col = L_KIND(c) == TP_COLUMN;
    const char *what = L_BWD(c) ? (col ? "tp_column_backward" : "tp_row_backward") : (col ? "tp_column_forward" : "tp_row_forward");
    if (!c->ran || !api_ok(c, s->rc, what)) return;
    int64_t T = c->arg[4], in = c->arg[5], out = c->arg[6];
    bool xpar = !col && L_FLAG(c), ysplit = col && !L_FLAG(c);
    if (!L_BWD(c)) {
        float *y = zeros(T * out);
        ref_fwd(T, in, out, s->x, s->W, L_BIAS(c) ? s->b : NULL, y);
        check_block(c, "y", s->y, y, out, 0, ysplit ? s->r0 : 0, 0, false);
        free(y);
        return;
    }
    float *dyh = master(T, out, DY_ID, PL_RNG_NORMAL, 0, 1), *dx = zeros(T * in), *dW = zeros(out * in), *db = zeros(out);
    ref_bwd(T, in, out, s->x, s->W, dyh, dx, dW, db);
    check_block(c, "dx", s->dx, dx, in, 0, xpar ? s->c0 : 0, 0, false);
    check_block(c, "dw (accumulated onto 0.25)", s->l.dw, dW, in, s->r0, s->c0, 0.25f, false);
    if (L_BIAS(c)) check_block(c, "db (accumulated onto 0.25)", pl_tensor_view(s->l.db, 1, col ? s->ol : out), db, out, 0, s->r0, 0.25f, false);
    free(dyh), free(dx), free(dW), free(db);
}

/* Forward: column-gather one all-gather, row one all-reduce (S = T*out floats); backward:
 * column one all-reduce of dx, row-full one all-gather of dx, row-parallel nothing. */
static void lin_model(drv_case *c, drv_model *m) {
    int64_t T = c->arg[4], in = c->arg[5], out = c->arg[6];
    bool col = L_KIND(c) == TP_COLUMN;
    m->no_p2p = true;
    m->gemm_flops = (L_BWD(c) ? 4.0 : 2.0) * T * in * out / g_n;
    if (g_n == 1 && c->m.coll_total == 0) return; /* one rank alone has nothing to send */
    m->exact_collectives = true;
    pl_op_kind k = PL_OP_COUNT;
    if (!L_BWD(c)) k = col ? (L_FLAG(c) ? PL_OP_ALLGATHER : PL_OP_COUNT) : PL_OP_ALLREDUCE;
    else k = col ? PL_OP_ALLREDUCE : (L_FLAG(c) ? PL_OP_COUNT : PL_OP_ALLGATHER);
    if (k == PL_OP_COUNT) return;
    m->colls[k] = 1;
    m->coll_bytes = 4.0 * T * (L_BWD(c) ? in : out);
}

static void lin_teardown(drv_case *c) {
    lin *s = c->state;
    pl_free(s->xin.data), pl_free(s->y.data), pl_free(s->dy.data), pl_free(s->dx.data);
    tp_linear_free(&s->l);
    free(s->W), free(s->b), free(s->x);
}

/* ---- the MLP: arg = backward, T, d, ffn -------------------------------------------------- */

typedef struct {
    tp_mlp m;
    pl_tensor x, y, dy, dx;
    int rc;
} mlp;

static void mlp_setup(drv_case *c) {
    mlp *s = drv_state(c, sizeof *s);
    int64_t T = c->arg[1], d = c->arg[2], f = c->arg[3], fl = f / g_n;
    if (!api_ok(c, tp_mlp_init(&s->m, d, f, T, g_seed, MLP_ID, g_comm), "tp_mlp_init")) return;
    s->x = make_input(T, d, 0, d, 0, X_ID), s->y = make_output(T, d);
    if (!c->arg[0]) return;
    s->dy = make_input(T, d, 0, d, 0, DY_ID), s->dx = make_output(T, d);
    if (!api_ok(c, tp_mlp_forward(&s->m, s->x, s->y, NULL), "tp_mlp_forward")) return; /* backward needs it */
    float *g[4] = {s->m.fc1.dw.data, s->m.fc2.dw.data, s->m.fc1.db, s->m.fc2.db};
    size_t n[4] = {(size_t)(fl * d), (size_t)(d * fl), (size_t)fl, (size_t)d};
    for (int i = 0; i < 4; i++) pl_fill(g[i], 0.25f, n[i], NULL);
}

static void mlp_run(drv_case *c) {
    mlp *s = c->state;
    s->rc = c->arg[0] ? tp_mlp_backward(&s->m, s->x, s->dy, s->dx, NULL) : tp_mlp_forward(&s->m, s->x, s->y, NULL);
}

static void mlp_check(drv_case *c) {
    mlp *s = c->state;
    if (!c->ran || !api_ok(c, s->rc, c->arg[0] ? "tp_mlp_backward" : "tp_mlp_forward")) return;
    int64_t T = c->arg[1], d = c->arg[2], f = c->arg[3], fl = f / g_n;
    float b1 = tp_init_bound(d), b2 = tp_init_bound(f);
    float *W1 = master(f, d, MLP_ID, PL_RNG_UNIFORM, -b1, b1), *B1 = master(1, f, MLP_ID + 1, PL_RNG_UNIFORM, -b1, b1);
    float *W2 = master(d, f, MLP_ID + 2, PL_RNG_UNIFORM, -b2, b2), *B2 = master(1, d, MLP_ID + 3, PL_RNG_UNIFORM, -b2, b2);
    float *x = master(T, d, X_ID, PL_RNG_NORMAL, 0, 1), *h = zeros(T * f), *a = zeros(T * f), *y = zeros(T * d);
    ref_fwd(T, d, f, x, W1, B1, h);
    for (int64_t i = 0; i < T * f; i++) a[i] = (float)gelu_d(h[i]);
    ref_fwd(T, f, d, a, W2, B2, y);
    if (!c->arg[0]) {
        check_block(c, "y", s->y, y, d, 0, 0, 0, false);
    } else {
        float *dy = master(T, d, DY_ID, PL_RNG_NORMAL, 0, 1), *da = zeros(T * f), *dx = zeros(T * d);
        float *dW1 = zeros(f * d), *db1 = zeros(f), *dW2 = zeros(d * f), *db2 = zeros(d);
        ref_bwd(T, f, d, a, W2, dy, da, dW2, db2);
        for (int64_t i = 0; i < T * f; i++) da[i] = (float)(da[i] * gelu_grad_d(h[i]));
        ref_bwd(T, d, f, x, W1, da, dx, dW1, db1);
        check_block(c, "dx", s->dx, dx, d, 0, 0, 0, false);
        check_block(c, "fc1 dw", s->m.fc1.dw, dW1, d, g_me * fl, 0, 0.25f, false);
        check_block(c, "fc1 db", pl_tensor_view(s->m.fc1.db, 1, fl), db1, f, 0, g_me * fl, 0.25f, false);
        check_block(c, "fc2 dw", s->m.fc2.dw, dW2, f, 0, g_me * fl, 0.25f, false);
        check_block(c, "fc2 db", pl_tensor_view(s->m.fc2.db, 1, d), db2, d, 0, 0, 0.25f, false);
        free(dy), free(da), free(dx), free(dW1), free(db1), free(dW2), free(db2);
    }
    free(W1), free(B1), free(W2), free(B2), free(x), free(h), free(a), free(y);
}

static void mlp_model(drv_case *c, drv_model *m) {
    int64_t T = c->arg[1], d = c->arg[2], f = c->arg[3];
    m->no_p2p = true;
    m->gemm_flops = (c->arg[0] ? 8.0 : 4.0) * T * d * f / g_n;
    if (g_n == 1 && c->m.coll_total == 0) return;
    m->exact_collectives = true;
    m->colls[PL_OP_ALLREDUCE] = 1;
    m->coll_bytes = 4.0 * T * d;
}

static void mlp_teardown(drv_case *c) {
    mlp *s = c->state;
    pl_free(s->x.data), pl_free(s->y.data), pl_free(s->dy.data), pl_free(s->dx.data);
    tp_mlp_free(&s->m);
}

/* ---- errors: arg = which, expected code ---------------------------------------------------- */

typedef struct {
    tp_linear l;
    tp_mlp m;
    int rc;
    size_t mem0;
    bool leak;
} err;

static void err_setup(drv_case *c) {
    err *s = drv_state(c, sizeof *s);
    int64_t k = 8 * g_n;
    /* a row layer whose forward is then given a y one column too wide */
    if (c->arg[0] == 3) api_ok(c, tp_linear_init(&s->l, TP_ROW, k, k, true, g_seed, W_ID, g_comm), "tp_linear_init of a valid layer");
    s->mem0 = pl_mem_in_use();
}

static void err_run(drv_case *c) {
    err *s = c->state;
    int64_t k = 8 * g_n;
    switch (c->arg[0]) {
    case 0: s->rc = tp_linear_init(&s->l, TP_COLUMN, k, k + 1, true, g_seed, W_ID, g_comm); break;
    case 1: s->rc = tp_linear_init(&s->l, TP_ROW, k + 1, k, true, g_seed, W_ID, g_comm); break;
    case 2: s->rc = tp_mlp_init(&s->m, k, k + 1, 4, g_seed, MLP_ID, g_comm); break;
    default: {
        pl_tensor x = make_input(3, k / g_n, 0, k, 0, X_ID), y = make_output(3, k + 1);
        s->rc = tp_row_forward(&s->l, x, y, true, NULL);
        pl_free(x.data), pl_free(y.data);
    }
    }
    s->leak = c->arg[0] != 3 && pl_mem_in_use() != s->mem0;
}

static void err_check(drv_case *c) {
    err *s = c->state;
    int want = (int)c->arg[1];
    if (!c->ran) return;
    double worst = drv_max(s->rc != want ? s->rc : -1);
    if (worst >= 0) {
        drv_fail(c, "returned %d (%s), expected %d (%s)", (int)worst, tp_error_name((int)worst), want, tp_error_name(want));
        return;
    }
    double comm = drv_max((double)c->m.coll_total + (double)c->m.msgs_sent), gemms = drv_max((double)c->m.gemm_calls);
    if (comm > 0 || gemms > 0)
        drv_fail(c, "returned the error but still communicated or computed (%.0f comm ops, %.0f GEMMs)", comm, gemms);
    else if (drv_max(s->leak) > 0) drv_fail(c, "returned the error but left device memory allocated");
    else drv_note(c, "returned %d (%s) and did nothing else", want, tp_error_name(want));
}

static void err_teardown(drv_case *c) {
    err *s = c->state;
    tp_linear_free(&s->l);
    tp_mlp_free(&s->m);
}


/* ---- the plan ------------------------------------------------------------------------------ */

static const drv_test TESTS[];
static void plan_linear(const drv_test *t, drv_plan *p) {
    static const int64_t SHAPES[5][3] = {{1, 16, 24}, {7, 32, 16}, {33, 24, 40}, {129, 128, 96}, {256, 512, 384}};
    /* in/out multiples of 8 divide by 1, 2, 4, 8 ranks; odd token counts and 1 token */
    int nshapes = strcmp(g_shapes, "small") ? 5 : 3;
    static const int KF[4][2] = {{TP_COLUMN, 0}, {TP_COLUMN, 1}, {TP_ROW, 1}, {TP_ROW, 0}};
    for (int i = 0; i < nshapes + 2; i++) {
        int k0 = i < nshapes ? 0 : i == nshapes ? 1 : 3, k1 = i < nshapes ? 4 : k0 + 1; /* then two without bias */
        const int64_t *sh = SHAPES[i < nshapes ? i : 1];
        for (int k = k0; k < k1; k++)
            for (int bwd = 0; bwd < 2; bwd++) {
                bool col = KF[k][0] == TP_COLUMN, bias = i < nshapes;
                drv_instance *in = drv_plan_add(p, t, "%s.%s.%s%s.T%lld.in%lld.out%lld", col ? "column" : "row",
                                                bwd ? "bwd" : "fwd", col ? (KF[k][1] ? "gather" : "split") : (KF[k][1] ? "parallel" : "full"),
                                                bias ? "" : ".nobias", (long long)sh[0], (long long)sh[1], (long long)sh[2]);
                snprintf(in->group, sizeof in->group, "%s.%s", col ? "column" : "row", bwd ? "bwd" : "fwd");
                int64_t a[7] = {KF[k][0], KF[k][1], bias, bwd, sh[0], sh[1], sh[2]};
                memcpy(in->arg, a, sizeof a);
            }
    }
}
static void plan_mlp(const drv_test *t, drv_plan *p) {
    bool small = !strcmp(g_shapes, "small");
    int64_t sh[2][3] = {{5, 16, 64}, {small ? 17 : 64, small ? 32 : 128, small ? 64 : 512}};
    for (int i = 0; i < 2; i++)
        for (int bwd = 0; bwd < 2; bwd++) {
            drv_instance *in = drv_plan_add(p, t, "mlp.%s.T%lld.d%lld.ffn%lld", bwd ? "bwd" : "fwd", (long long)sh[i][0],
                                            (long long)sh[i][1], (long long)sh[i][2]);
            snprintf(in->group, sizeof in->group, "mlp.%s", bwd ? "bwd" : "fwd");
            int64_t a[4] = {bwd, sh[i][0], sh[i][1], sh[i][2]};
            memcpy(in->arg, a, sizeof a);
        }
}
static void plan_errors(const drv_test *t, drv_plan *p) {
    static const char *NAMES[4] = {"error.not_divisible.column", "error.not_divisible.row", "error.not_divisible.mlp",
                                   "error.shape.row_forward"};
    for (int i = g_n > 1 ? 0 : 3; i < 4; i++) {
        drv_instance *in = drv_plan_add(p, t, "%s", NAMES[i]);
        in->arg[0] = i, in->arg[1] = i < 3 ? TP_ERR_NOT_DIVISIBLE : TP_ERR_SHAPE;
    }
}

static const drv_test TESTS[] = {
    {"linear", "linear", plan_linear, lin_setup, lin_run, lin_check, lin_model, NULL, lin_teardown, NULL},
    {"mlp", "mlp", plan_mlp, mlp_setup, mlp_run, mlp_check, mlp_model, NULL, mlp_teardown, NULL},
    {"errors", "errors", plan_errors, err_setup, err_run, err_check, NULL, NULL, err_teardown, NULL},
    {"scaling", "scaling", plan_scaling, scal_setup, scal_run, scal_check, NULL, NULL, scal_teardown, NULL},
    {NULL},
};

static void lab2_init(void) {
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    g_seed = pl_info()->seed;
    if (strcmp(g_shapes, "small") && strcmp(g_shapes, "full")) pl_usage_error("--shapes: expected small or full, got '%s'", g_shapes);
    char err[256];
    g_have_prof = plc_profile_load(&g_prof, g_profile, err, sizeof err) == 0;
    if (!g_have_prof && strcmp(g_profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    drv_print("# lab02: %d rank(s), device %s, comm %s, tolerance %.0e (%s)\n", g_n, pl_device_name(pl_info()->device),
              pl_comm_name(pl_info()->comm), drv_tolerance(), drv_tolerance_why());
}

static const drv_flag FLAGS[] = {
    {"--shapes", DRV_STR, &g_shapes, 0, 0, "small|full: the case sizes (default full)"},
    {"--profile", DRV_STR, &g_profile, 0, 0, "NAME|FILE: cost-model profile for predictions (default dgx-h100)"},
    {"--this-profile", DRV_STR, &g_this_profile, 0, 0, "NAME|FILE: also predict the bench step with this profile"},
    {"--shape", DRV_STR, &g_shape, 0, 0, "T,D,FFN: the MLP step of --run scaling / bench (default 128,512,2048)"},
    {"--gemm-shape", DRV_STR, &g_gemm_shape, 0, 0, "T,IN,OUT: the column layer of --run bench (default 256,1024,2048)"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"scaling", "strong and weak scaling of the MLP step, measured and predicted (make scaling LAB=2)", mode_scaling,
     "1 2 4 8", "scripts/plot-scaling.sh"},
    {"bench", "the column layer vs pl_gemm of its shard; the cost model vs this machine (make bench LAB=2)",
     mode_bench, "1 2", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "02-tp-gemm",
    .title = "Lab 2: tensor-parallel linear layers and MLP",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab2_init,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
