/* lab02.c (referee) - Lab 2's masters, serial reference and checks of the linear, MLP and
 * error cases (the scaling case: lab02_scaling.c).
 *
 * Every referee builds the serial master tensors of a case from the secret seed and
 * computes the serial layer on the host in float64; it gives its player only this rank's
 * shard, inputs and initial gradients, and compares what comes back with the matching
 * slices. Counted quantities (collectives, point-to-point traffic, GEMM flops, device
 * memory) are the player's own counters of the measured call (drv_use_counters): the
 * rubric items they feed are labelled where they are judged.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"

static plc_profile g_prof;
static bool g_have_prof;
const plc_profile *lab2_profile(void) { return g_have_prof ? &g_prof : NULL; }

void lab2_init(void) {
    const lab2_flags *f = lab2_opts();
    if (strcmp(f->shapes, "small") && strcmp(f->shapes, "full"))
        pl_usage_error("--shapes: expected small or full, got '%s'", f->shapes);
    char err[256];
    g_have_prof = plc_profile_load(&g_prof, f->profile, err, sizeof err) == 0;
    if (!g_have_prof && strcmp(f->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    drv_print("# lab02: %d rank(s), tolerance %.0e (%s)\n", pl_world(), drv_tolerance(), drv_tolerance_why());
}

void lab2_teardown(drv_case *c) {
    lab2_case *st = c->state;
    if (!st) return;
    free(st->W), free(st->b), free(st->x), free(st->dy);
    free(st->W1), free(st->B1), free(st->W2), free(st->B2);
    free(st->scaling);
}

/* ---- host reference (float64) ---------------------------------------------------------- */

float *lab2_master(int64_t rows, int64_t cols, uint64_t seed, uint64_t id, bool uniform, float bound) {
    float *h = malloc((size_t)(rows * cols) * sizeof(float) + 4);
    PL_CHECK(h != NULL, "out of host memory");
    pl_rng_fill_host(h, rows, cols, cols, 0, 0, seed, id, uniform ? PL_RNG_UNIFORM : PL_RNG_NORMAL,
                     uniform ? -bound : 0, uniform ? bound : 1);
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
static void ref_bwd(int64_t T, int64_t in, int64_t out, const float *x, const float *W, const float *dy, float *dx,
                    float *dW, float *db) {
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
/* A slot [rows x cols] (ld = cols + pad, the pad poisoned) holding that block. */
static float *block_slot(drv_case *c, const char *name, unsigned flags, const float *m, int64_t ld, int64_t r0,
                         int64_t rows, int64_t c0, int64_t cols, int64_t pad, float add) {
    float *s = drv_slot_new(c, name, (size_t)(rows * (cols + pad)) * sizeof(float), flags);
    drv_poison_host(s, (size_t)(rows * (cols + pad)) * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) s[i * (cols + pad) + j] = m[(r0 + i) * ld + c0 + j] + add;
    return s;
}
/* What the player left in a slot [rows x cols] against a block of a master + add. */
static void check_block(drv_case *c, const char *what, const char *slot, const float *m, int64_t ld, int64_t r0,
                        int64_t rows, int64_t c0, int64_t cols, float add, bool exact) {
    float *e = block(m, ld, r0, rows, c0, cols, add);
    drv_check_strided(c, what, drv_slot_host(c, slot), (size_t)cols, e, (size_t)rows, (size_t)cols, exact);
    free(e);
}
/* The shard tp_*_init built from the init seed against the init master's block: bit for bit. */
static void check_init(drv_case *c, const char *what, const char *slot, int64_t rows, int64_t cols, int64_t gcols,
                       int64_t r0, int64_t c0, uint64_t id, float bound) {
    float *e = malloc((size_t)(rows * cols) * sizeof(float) + 4);
    PL_CHECK(e != NULL, "out of host memory");
    pl_rng_fill_host(e, rows, cols, gcols, r0, c0, drv_case_seed(c, LAB2_INIT, 0), id, PL_RNG_UNIFORM, -bound, bound);
    drv_check_strided(c, what, drv_slot_host(c, slot), (size_t)cols, e, (size_t)rows, (size_t)cols, true);
    free(e);
}

static void common_slots(drv_case *c) {
    uint64_t *seed = drv_slot_new(c, "iseed", sizeof(uint64_t), DRV_IN | DRV_CONST);
    *seed = drv_case_seed(c, LAB2_INIT, 0);
    drv_slot_new(c, "status", sizeof(lab2_status), DRV_OUT | DRV_ZEROED);
    drv_counters_slot(c, "counters");
}
static lab2_status status_of(drv_case *c) {
    lab2_status s;
    memcpy(&s, drv_slot_host(c, "status"), sizeof s);
    return s;
}
static bool api_ok(drv_case *c, int rc, const char *what) { return drv_all_ok(c, rc, what, lab2_error_name); }

/* ---- linear layers ------------------------------------------------------------------------ */

/* Initial gradients: not zero, so that a call that overwrites them shows. */
static float *grad0(int64_t rows, int64_t cols, uint64_t seed, uint64_t id) {
    return lab2_master(rows, cols, seed, LAB2_GRAD0_ID + id, false, 0);
}

void lin_setup(drv_case *c) {
    lab2_lin s = lab2_lin_of(c);
    lab2_case *st = drv_state(c, sizeof *st);
    uint64_t sec = drv_case_seed(c, LAB2_SECRET, 0);
    float bound = lab2_init_bound(s.in);
    char name[32];
    st->W = lab2_master(s.out, s.in, sec, LAB2_W_ID, true, bound);
    st->b = lab2_master(1, s.out, sec, LAB2_W_ID + 1, true, bound);
    common_slots(c);
    drv_slot_new(c, "w_init", (size_t)(s.ol * s.il) * sizeof(float), DRV_OUT);
    drv_slot_new(c, "dw_init", (size_t)(s.ol * s.il) * sizeof(float), DRV_OUT);
    block_slot(c, "w", DRV_IN | DRV_CONST, st->W, s.in, s.r0, s.ol, s.c0, s.il, 0, 0);
    if (s.bias) {
        drv_slot_new(c, "b_init", (size_t)s.blen * sizeof(float), DRV_OUT);
        drv_slot_new(c, "db_init", (size_t)s.blen * sizeof(float), DRV_OUT);
        block_slot(c, "b", DRV_IN | DRV_CONST, st->b, s.out, 0, 1, s.b0, s.blen, 0, 0);
    }
    /* inputs and outputs are strided views (ld > cols) wherever the API allows, as a real
     * model passes them; a case of two steps has the second step's beside the first's */
    for (int k = 1; k <= s.steps; k++) {
        uint64_t more = (uint64_t)(k - 1) * LAB2_STEP_ID;
        float *x = lab2_master(s.T, s.in, sec, LAB2_X_ID + more, false, 0);
        block_slot(c, lab2_step_slot(name, sizeof name, "x", k), DRV_IN | DRV_CONST, x, s.in, 0, s.T, s.x0, s.xcols,
                   s.xld - s.xcols, 0);
        if (k == 1) st->x = x;
        else free(x);
        if (!s.bwd) {
            drv_slot_new(c, "y", (size_t)(s.T * s.yld) * sizeof(float), DRV_OUT);
            continue;
        }
        float *dy = lab2_master(s.T, s.out, sec, LAB2_DY_ID + more, false, 0);
        block_slot(c, lab2_step_slot(name, sizeof name, "dy", k), DRV_IN | DRV_CONST, dy, s.out, 0, s.T, s.y0, s.ycols,
                   s.dyld - s.ycols, 0);
        if (k == 1) st->dy = dy;
        else free(dy);
        drv_slot_new(c, lab2_step_slot(name, sizeof name, "dx", k), (size_t)(s.T * s.dxld) * sizeof(float), DRV_OUT);
    }
    if (!s.bwd) return;
    /* gradients accumulate: they start from the referee's */
    float *gw = grad0(s.out, s.in, sec, 0), *gb = grad0(1, s.out, sec, 1);
    block_slot(c, "dw", DRV_INOUT, gw, s.in, s.r0, s.ol, s.c0, s.il, 0, 0);
    if (s.bias) block_slot(c, "db", DRV_INOUT, gb, s.out, 0, 1, s.b0, s.blen, 0, 0);
    free(gw), free(gb);
}

/* The layer init built: its shapes, then its shard bit for bit. False: judged, stop. */
static bool lin_init_ok(drv_case *c, const lab2_lin *s, const lab2_status *ps) {
    if (!api_ok(c, ps->init_rc, "tp_linear_init")) return false;
    bool shape = ps->w_rows == s->ol && ps->w_cols == s->il && ps->w_data;
    if (!drv_check_all(c, shape, "shard w is [%lld x %lld], expected [%lld x %lld]", (long long)ps->w_rows,
                       (long long)ps->w_cols, (long long)s->ol, (long long)s->il) ||
        (s->bias && !drv_check_all(c, ps->b_data != 0, "init: b is NULL although the layer has a bias")) ||
        !drv_check_all(c, ps->grads_ok != 0, "init: dw (or db) is not allocated with the shard's shape"))
        return false;
    float bound = lab2_init_bound(s->in);
    check_init(c, "weight shard w", "w_init", s->ol, s->il, s->in, s->r0, s->c0, LAB2_W_ID, bound);
    if (s->bias) check_init(c, "bias shard b", "b_init", 1, s->blen, s->out, 0, s->b0, LAB2_W_ID + 1, bound);
    /* the gradients start at zero: the first backward adds to them (in checked runs fresh
     * memory holds NaN, not the zeros an allocator may happen to return) */
    float *z = zeros(s->ol * s->il);
    drv_check_strided(c, "gradient dw as init left it (zeroed)", drv_slot_host(c, "dw_init"), (size_t)s->il, z,
                      (size_t)s->ol, (size_t)s->il, true);
    if (s->bias)
        drv_check_strided(c, "gradient db as init left it (zeroed)", drv_slot_host(c, "db_init"), (size_t)s->blen, z, 1,
                          (size_t)s->blen, true);
    free(z);
    return true;
}

void lin_check(drv_case *c) {
    if (!c->ran) return;
    lab2_case *st = c->state;
    lab2_lin s = lab2_lin_of(c);
    lab2_status ps = status_of(c);
    if (!lin_init_ok(c, &s, &ps) || drv_min(ps.called != 0) == 0) return;
    drv_use_counters(c, "counters"); /* model() judges the (last) call alone */
    const char *what = s.bwd ? (s.col ? "tp_column_backward" : "tp_row_backward")
                             : (s.col ? "tp_column_forward" : "tp_row_forward");
    if (!api_ok(c, ps.call_rc, what)) return;
    if (!s.bwd) {
        float *y = zeros(s.T * s.out);
        ref_fwd(s.T, s.in, s.out, st->x, st->W, s.bias ? st->b : NULL, y);
        float *e = block(y, s.out, 0, s.T, s.y0, s.ycols, 0);
        drv_check_strided(c, "y", drv_slot_host(c, "y"), (size_t)s.yld, e, (size_t)s.T, (size_t)s.ycols, false);
        drv_check_pad(c, "y", drv_slot_host(c, "y"), (size_t)s.yld, (size_t)s.T, (size_t)s.ycols);
        free(e), free(y);
        return;
    }
    uint64_t sec = drv_case_seed(c, LAB2_SECRET, 0);
    float *dW = grad0(s.out, s.in, sec, 0), *db = grad0(1, s.out, sec, 1); /* the gradients start there */
    float *dx = zeros(s.T * s.in), *dWk = zeros(s.out * s.in), *dbk = zeros(s.out);
    char name[32], what_dx[32];
    for (int k = 1; k <= s.steps; k++) {
        uint64_t more = (uint64_t)(k - 1) * LAB2_STEP_ID;
        float *x = k == 1 ? st->x : lab2_master(s.T, s.in, sec, LAB2_X_ID + more, false, 0);
        float *dy = k == 1 ? st->dy : lab2_master(s.T, s.out, sec, LAB2_DY_ID + more, false, 0);
        ref_bwd(s.T, s.in, s.out, x, st->W, dy, dx, dWk, dbk);
        for (int64_t i = 0; i < s.out * s.in; i++) dW[i] += dWk[i];
        for (int64_t i = 0; i < s.out; i++) db[i] += dbk[i];
        float *e = block(dx, s.in, 0, s.T, s.x0, s.xcols, 0);
        lab2_step_slot(name, sizeof name, "dx", k);
        if (s.steps > 1) snprintf(what_dx, sizeof what_dx, "dx of call %d", k);
        else snprintf(what_dx, sizeof what_dx, "dx");
        drv_check_strided(c, what_dx, drv_slot_host(c, name), (size_t)s.dxld, e, (size_t)s.T, (size_t)s.xcols, false);
        drv_check_pad(c, what_dx, drv_slot_host(c, name), (size_t)s.dxld, (size_t)s.T, (size_t)s.xcols);
        free(e);
        if (k > 1) free(x), free(dy);
    }
    const char *acc = s.steps > 1 ? "accumulated over the calls onto the initial gradients" : "accumulated onto the initial gradients";
    char what_w[96], what_b[96];
    snprintf(what_w, sizeof what_w, "dw (%s)", acc);
    snprintf(what_b, sizeof what_b, "db (%s)", acc);
    check_block(c, what_w, "dw", dW, s.in, s.r0, s.ol, s.c0, s.il, 0, false);
    if (s.bias) check_block(c, what_b, "db", db, s.out, 0, 1, s.b0, s.blen, 0, false);
    free(dx), free(dW), free(db), free(dWk), free(dbk);
}

/* Forward: column-gather one all-gather, row one all-reduce (S = T*out floats); backward:
 * column one all-reduce of dx, row-full one all-gather of dx, row-parallel nothing.
 * Rubric items column.*, row.*: collectives, point-to-point and GEMM flops are the
 * player's own counters of the call, device memory in use before and after the case its
 * own accounting. */
void lin_model(drv_case *c, drv_model *m) {
    lab2_lin s = lab2_lin_of(c);
    int n = c->world;
    m->no_p2p = true;
    m->no_leak = true;
    m->gemm_flops = (s.bwd ? 4.0 : 2.0) * s.T * s.in * s.out / n;
    if (n == 1 && c->m.coll_total == 0) return; /* one rank alone has nothing to send */
    m->exact_collectives = true;
    pl_op_kind k;
    if (!s.bwd) k = s.col ? (s.flag ? PL_OP_ALLGATHER : PL_OP_COUNT) : PL_OP_ALLREDUCE;
    else k = s.col ? PL_OP_ALLREDUCE : (s.flag ? PL_OP_COUNT : PL_OP_ALLGATHER);
    if (k == PL_OP_COUNT) return;
    m->colls[k] = 1;
    m->coll_bytes = 4.0 * s.T * (s.bwd ? s.in : s.out);
}

/* ---- the MLP ------------------------------------------------------------------------------- */

void lab2_mlp_masters(const lab2_mlp *s, uint64_t seed, float **W1, float **B1, float **W2, float **B2) {
    float b1 = lab2_init_bound(s->d), b2 = lab2_init_bound(s->f);
    *W1 = lab2_master(s->f, s->d, seed, LAB2_MLP_ID, true, b1), *B1 = lab2_master(1, s->f, seed, LAB2_MLP_ID + 1, true, b1);
    *W2 = lab2_master(s->d, s->f, seed, LAB2_MLP_ID + 2, true, b2), *B2 = lab2_master(1, s->d, seed, LAB2_MLP_ID + 3, true, b2);
}

void lab2_mlp_shard_slots(drv_case *c, const lab2_mlp *s, uint64_t seed) {
    lab2_case *st = c->state;
    lab2_mlp_masters(s, seed, &st->W1, &st->B1, &st->W2, &st->B2);
    int64_t r0 = c->rank * s->fl;
    block_slot(c, "w1", DRV_IN | DRV_CONST, st->W1, s->d, r0, s->fl, 0, s->d, 0, 0);
    block_slot(c, "b1", DRV_IN | DRV_CONST, st->B1, s->f, 0, 1, r0, s->fl, 0, 0);
    block_slot(c, "w2", DRV_IN | DRV_CONST, st->W2, s->f, 0, s->d, r0, s->fl, 0, 0);
    block_slot(c, "b2", DRV_IN | DRV_CONST, st->B2, s->d, 0, 1, 0, s->d, 0, 0);
}

/* The MLP's four initial gradients (masters of fc1 w, b; fc2 w, b). */
static void mlp_grad0(const lab2_mlp *s, uint64_t seed, float **g) {
    g[0] = grad0(s->f, s->d, seed, 2), g[1] = grad0(1, s->f, seed, 3);
    g[2] = grad0(s->d, s->f, seed, 4), g[3] = grad0(1, s->d, seed, 5);
}

void mlp_setup(drv_case *c) {
    lab2_mlp s = lab2_mlp_of(c);
    lab2_case *st = drv_state(c, sizeof *st);
    uint64_t sec = drv_case_seed(c, LAB2_SECRET, 0);
    char name[32];
    common_slots(c);
    lab2_mlp_shard_slots(c, &s, sec);
    const char *init[4] = {"w1_init", "b1_init", "w2_init", "b2_init"};
    int64_t n[4] = {s.fl * s.d, s.fl, s.d * s.fl, s.d};
    for (int i = 0; i < 4; i++) drv_slot_new(c, init[i], (size_t)n[i] * sizeof(float), DRV_OUT);
    for (int k = 1; k <= s.steps; k++) {
        uint64_t more = (uint64_t)(k - 1) * LAB2_STEP_ID;
        float *x = lab2_master(s.T, s.d, sec, LAB2_X_ID + more, false, 0);
        block_slot(c, lab2_step_slot(name, sizeof name, "x", k), DRV_IN | DRV_CONST, x, s.d, 0, s.T, 0, s.d, 0, 0);
        if (k == 1) st->x = x;
        else free(x);
        if (!s.bwd) {
            drv_slot_new(c, "y", (size_t)(s.T * s.d) * sizeof(float), DRV_OUT);
            continue;
        }
        float *dy = lab2_master(s.T, s.d, sec, LAB2_DY_ID + more, false, 0);
        block_slot(c, lab2_step_slot(name, sizeof name, "dy", k), DRV_IN | DRV_CONST, dy, s.d, 0, s.T, 0, s.d, 0, 0);
        if (k == 1) st->dy = dy;
        else free(dy);
        drv_slot_new(c, lab2_step_slot(name, sizeof name, "dx", k), (size_t)(s.T * s.d) * sizeof(float), DRV_OUT);
    }
    if (!s.bwd) return;
    float *g[4];
    mlp_grad0(&s, sec, g);
    int64_t r0 = c->rank * s.fl;
    block_slot(c, "dw1", DRV_INOUT, g[0], s.d, r0, s.fl, 0, s.d, 0, 0); /* gradients accumulate */
    block_slot(c, "db1", DRV_INOUT, g[1], s.f, 0, 1, r0, s.fl, 0, 0);
    block_slot(c, "dw2", DRV_INOUT, g[2], s.f, 0, s.d, r0, s.fl, 0, 0);
    block_slot(c, "db2", DRV_INOUT, g[3], s.d, 0, 1, 0, s.d, 0, 0);
    for (int i = 0; i < 4; i++) free(g[i]);
}

/* The serial MLP on x: h = fc1(x), a = gelu(h), y = fc2(a); with dy also dx and the
 * gradients added into g (fc1 w, b; fc2 w, b). */
static void mlp_ref(const lab2_case *st, const lab2_mlp *s, const float *x, const float *dy, float *y, float *dx,
                    float **g) {
    int64_t T = s->T, d = s->d, f = s->f;
    float *h = zeros(T * f), *a = zeros(T * f);
    ref_fwd(T, d, f, x, st->W1, st->B1, h);
    for (int64_t i = 0; i < T * f; i++) a[i] = (float)gelu_d(h[i]);
    ref_fwd(T, f, d, a, st->W2, st->B2, y);
    if (dy) {
        float *da = zeros(T * f), *k[4] = {zeros(f * d), zeros(f), zeros(d * f), zeros(d)};
        int64_t n[4] = {f * d, f, d * f, d};
        ref_bwd(T, f, d, a, st->W2, dy, da, k[2], k[3]);
        for (int64_t i = 0; i < T * f; i++) da[i] = (float)(da[i] * gelu_grad_d(h[i]));
        ref_bwd(T, d, f, x, st->W1, da, dx, k[0], k[1]);
        for (int i = 0; i < 4; i++) {
            for (int64_t j = 0; j < n[i]; j++) g[i][j] += k[i][j];
            free(k[i]);
        }
        free(da);
    }
    free(h), free(a);
}

void mlp_check(drv_case *c) {
    if (!c->ran) return;
    lab2_case *st = c->state;
    lab2_mlp s = lab2_mlp_of(c);
    lab2_status ps = status_of(c);
    if (!api_ok(c, ps.init_rc, "tp_mlp_init")) return;
    bool shape = ps.w_rows == s.fl && ps.w_cols == s.d && ps.w2_rows == s.d && ps.w2_cols == s.fl && ps.w_data &&
                 ps.b_data && ps.grads_ok;
    if (!drv_check_all(c, shape, "tp_mlp_init: fc1 w [%lld x %lld], fc2 w [%lld x %lld] (expected [%lld x %lld], [%lld x "
                       "%lld]), every w, b, dw, db allocated: %s", (long long)ps.w_rows, (long long)ps.w_cols,
                       (long long)ps.w2_rows, (long long)ps.w2_cols, (long long)s.fl, (long long)s.d, (long long)s.d,
                       (long long)s.fl, ps.w_data && ps.b_data && ps.grads_ok ? "yes" : "no"))
        return;
    int64_t r0 = c->rank * s.fl, T = s.T, d = s.d, f = s.f, fl = s.fl;
    float b1 = lab2_init_bound(d), b2 = lab2_init_bound(f);
    check_init(c, "fc1 shard w (tp_mlp_init)", "w1_init", fl, d, d, r0, 0, LAB2_MLP_ID, b1);
    check_init(c, "fc1 shard b (tp_mlp_init)", "b1_init", 1, fl, f, 0, r0, LAB2_MLP_ID + 1, b1);
    check_init(c, "fc2 shard w (tp_mlp_init)", "w2_init", d, fl, f, 0, r0, LAB2_MLP_ID + 2, b2);
    check_init(c, "fc2 b (tp_mlp_init)", "b2_init", 1, d, d, 0, 0, LAB2_MLP_ID + 3, b2);
    if (s.bwd && !api_ok(c, ps.fwd_rc, "tp_mlp_forward")) return; /* backward needs it */
    if (drv_min(ps.called != 0) == 0) return;
    drv_use_counters(c, "counters");
    if (!api_ok(c, ps.call_rc, s.bwd ? "tp_mlp_backward" : "tp_mlp_forward")) return;
    float *y = zeros(T * d), *dx = zeros(T * d);
    if (!s.bwd) {
        mlp_ref(st, &s, st->x, NULL, y, NULL, NULL);
        check_block(c, "y", "y", y, d, 0, T, 0, d, 0, false);
        free(y), free(dx);
        return;
    }
    uint64_t sec = drv_case_seed(c, LAB2_SECRET, 0);
    float *g[4];
    mlp_grad0(&s, sec, g); /* the gradients start there */
    char name[32], what[32];
    for (int k = 1; k <= s.steps; k++) {
        uint64_t more = (uint64_t)(k - 1) * LAB2_STEP_ID;
        float *x = k == 1 ? st->x : lab2_master(T, d, sec, LAB2_X_ID + more, false, 0);
        float *dy = k == 1 ? st->dy : lab2_master(T, d, sec, LAB2_DY_ID + more, false, 0);
        mlp_ref(st, &s, x, dy, y, dx, g);
        if (s.steps > 1) snprintf(what, sizeof what, "dx of step %d", k);
        else snprintf(what, sizeof what, "dx");
        check_block(c, what, lab2_step_slot(name, sizeof name, "dx", k), dx, d, 0, T, 0, d, 0, false);
        if (k > 1) free(x), free(dy);
    }
    check_block(c, "fc1 dw", "dw1", g[0], d, r0, fl, 0, d, 0, false);
    check_block(c, "fc1 db", "db1", g[1], f, 0, 1, r0, fl, 0, false);
    check_block(c, "fc2 dw", "dw2", g[2], f, 0, d, r0, fl, 0, false);
    check_block(c, "fc2 db", "db2", g[3], d, 0, 1, 0, d, 0, false);
    for (int i = 0; i < 4; i++) free(g[i]);
    free(y), free(dx);
}

/* One all-reduce each way; 4 T d f / n GEMM flops forward, twice that backward (rubric item
 * mlp: the player's counters of the call, its memory in use for the leak). */
void mlp_model(drv_case *c, drv_model *m) {
    lab2_mlp s = lab2_mlp_of(c);
    m->no_p2p = true;
    m->no_leak = true;
    m->gemm_flops = (s.bwd ? 8.0 : 4.0) * s.T * s.d * s.f / c->world;
    if (c->world == 1 && c->m.coll_total == 0) return;
    m->exact_collectives = true;
    m->colls[PL_OP_ALLREDUCE] = 1;
    m->coll_bytes = 4.0 * s.T * s.d;
}

/* ---- errors: arg = which, the expected code ------------------------------------------------ */

void err_setup(drv_case *c) {
    lab2_case *st = drv_state(c, sizeof *st);
    lab2_error_shapes e = lab2_error_shapes_of(c);
    uint64_t sec = drv_case_seed(c, LAB2_SECRET, 0);
    common_slots(c);
    const char *names[4] = {"x", "dy", "y", "dx"};
    const int64_t *shape[4] = {e.x, e.dy, e.y, e.dx};
    for (int i = 0; i < 4; i++) {
        if (!shape[i][0]) continue;
        size_t bytes = (size_t)(shape[i][0] * shape[i][1]) * sizeof(float);
        if (i >= 2) {
            drv_slot_new(c, names[i], bytes, DRV_OUT);
            continue;
        }
        float *m = lab2_master(shape[i][0], shape[i][1], sec, i ? LAB2_DY_ID : LAB2_X_ID, false, 0);
        memcpy(drv_slot_new(c, names[i], bytes, DRV_IN | DRV_CONST), m, bytes);
        if (i == 0) st->x = m;
        else st->dy = m;
    }
}

/* Rubric item errors: the code is the player's return value; "did nothing else" rests on
 * its counters (collectives, messages, GEMMs) and its device memory in use around the call. */
void err_check(drv_case *c) {
    if (!c->ran) return;
    lab2_status ps = status_of(c);
    int want = (int)c->arg[1], which = (int)c->arg[0];
    if (which >= LAB2_E_ROW_FORWARD &&
        !api_ok(c, ps.init_rc, which >= LAB2_E_MLP_FORWARD ? "tp_mlp_init of a valid MLP" : "tp_linear_init of a valid layer"))
        return;
    if ((which == LAB2_E_MLP_BACKWARD || which == LAB2_E_MLP_BACKWARD_TOKENS) &&
        !api_ok(c, ps.fwd_rc, "tp_mlp_forward of a valid input"))
        return;
    if (drv_min(ps.called != 0) == 0) return;
    drv_use_counters(c, "counters");
    drv_counters k = drv_counters_of(c, "counters");
    /* every rank's code against the expected one (a wrong negative code fails too) */
    if (!drv_check_code(c, ps.call_rc, want, "the call", lab2_error_name)) return;
    bool leak = k.mem_after != k.mem_before;
    double comm = drv_max((double)c->m.coll_total + (double)c->m.msgs_sent), gemms = drv_max((double)c->m.gemm_calls);
    if (comm > 0 || gemms > 0)
        drv_fail(c, "returned the error but still communicated or computed (%.0f comm ops, %.0f GEMMs)", comm, gemms);
    else if (drv_max(leak) > 0) drv_fail(c, "returned the error but left device memory allocated");
    else drv_note(c, "returned %d (%s) and did nothing else", want, lab2_error_name(want));
}

/* Whatever the layers allocated is freed again by tp_*_free (the player's accounting). */
void err_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}
