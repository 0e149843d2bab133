/* lab02.c - the case table of Lab 2 (tensor-parallel linear layers and MLP).
 *
 * The referee (grader/referee/lab02.c) builds the serial master tensors from the counter
 * RNG and an independent serial reference on the host in float64, gives each rank's player
 * its shard, its inputs and its initial gradients, and checks:
 *   - the shard tp_*_init builds: bit-identical to the right slice of the master;
 *   - outputs and gradients: relative Frobenius error within the tolerance (1e-5 with fp32
 *     GEMMs, 5e-3 with TF32: drv_tolerance);
 *   - the communication, from the player's counters: the exact number, kind and size of
 *     collectives per forward and per backward, and no point-to-point traffic;
 *   - the work: GEMM flops per rank = serial flops / world size, exactly (player counted).
 * The scaling case (grader/referee/lab02_scaling.c) adds the counted bytes against the
 * formula and the cost model's prediction of the player's recorded step (or, where every
 * rank has its own GPU, the referee's measurement against the same work issued directly).
 * The player (grader/player/lab02.c) only calls: init, the measured call, copies in and
 * out of the layer. Modes: --run bench (make bench LAB=2), --run scaling (make scaling
 * LAB=2), in the player alone (grader/player/lab02_modes.c).
 */
#include <stdio.h>
#include <string.h>

#include "kern_bias.h" // defines: kern_bias_cost
#include "kern_gelu.h" // defines: kern_gelu_cost
#include "lab02.h"

static lab2_flags g_flags2 = {.shapes = "full", .profile = "dgx-h100"};
const lab2_flags *lab2_opts(void) { return &g_flags2; }

const char *lab2_error_name(int code) {
    switch (code) {
    case LAB2_OK: return "ok";
    case LAB2_ERR_NOT_DIVISIBLE: return "dimension not divisible by the world size";
    case LAB2_ERR_SHAPE: return "tensor shape does not match the layer";
    case LAB2_ERR_NOT_IMPLEMENTED: return "still the starter stub: write this function";
    default: return "unknown error";
    }
}

lab2_lin lab2_lin_of(const drv_case *c) {
    lab2_lin s = {.kind = (int)c->arg[0], .flag = c->arg[1] != 0, .bias = c->arg[2] != 0, .bwd = c->arg[3] != 0,
                  .T = c->arg[4], .in = c->arg[5], .out = c->arg[6], .steps = c->arg[7] > 1 ? (int)c->arg[7] : 1};
    int64_t n = c->world, r = c->rank;
    s.col = s.kind == LAB2_COLUMN;
    s.xpar = !s.col && s.flag;
    s.ysplit = s.col && !s.flag;
    s.ol = s.col ? s.out / n : s.out, s.il = s.col ? s.in : s.in / n;
    s.r0 = s.col ? r * s.ol : 0, s.c0 = s.col ? 0 : r * s.il;
    s.blen = s.col ? s.ol : s.out, s.b0 = s.r0;
    s.xcols = s.xpar ? s.il : s.in, s.x0 = s.xpar ? s.c0 : 0;
    s.ycols = s.ysplit ? s.ol : s.out, s.y0 = s.ysplit ? s.r0 : 0;
    /* every view the API lets be strided is: only the row layer's y must be contiguous */
    s.xld = s.xcols + LAB2_PAD, s.dyld = s.ycols + LAB2_PAD, s.dxld = s.xcols + LAB2_PAD;
    s.yld = s.col ? s.ycols + LAB2_PAD : s.ycols;
    return s;
}

const char *lab2_step_slot(char *buf, size_t n, const char *name, int step) {
    if (step <= 1) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "%s.%d", name, step);
    return buf;
}

/* Each call is given one tensor one column (or, for the MLP's forward, one row past its
 * max_tokens) off its shape; the layer is valid (k = 8 n divides). */
lab2_error_shapes lab2_error_shapes_of(const drv_case *c) {
    int64_t n = c->world, k = 8 * n;
    lab2_error_shapes e = {.k = k};
    switch (c->arg[0]) {
    case LAB2_E_ROW_FORWARD: /* row layer (k, k), input parallel: y one column too wide */
        e.x[0] = 3, e.x[1] = k / n, e.y[0] = 3, e.y[1] = k + 1;
        break;
    case LAB2_E_COLUMN_FORWARD: /* column layer (k, k), split: y one column too wide */
        e.x[0] = 3, e.x[1] = k, e.y[0] = 3, e.y[1] = k / n + 1;
        break;
    case LAB2_E_COLUMN_BACKWARD: /* column layer, split: dx one column too wide */
        e.x[0] = 3, e.x[1] = k, e.dy[0] = 3, e.dy[1] = k / n, e.dx[0] = 3, e.dx[1] = k + 1;
        break;
    case LAB2_E_ROW_BACKWARD: /* row layer, input parallel: dx one column too wide */
        e.x[0] = 3, e.x[1] = k / n, e.dy[0] = 3, e.dy[1] = k, e.dx[0] = 3, e.dx[1] = k / n + 1;
        break;
    case LAB2_E_COLUMN_BACKWARD_DY: /* column layer, split: dy one column too wide */
        e.x[0] = 3, e.x[1] = k, e.dy[0] = 3, e.dy[1] = k / n + 1, e.dx[0] = 3, e.dx[1] = k;
        break;
    case LAB2_E_ROW_BACKWARD_DY: /* row layer, input parallel: dy one column too wide */
        e.x[0] = 3, e.x[1] = k / n, e.dy[0] = 3, e.dy[1] = k + 1, e.dx[0] = 3, e.dx[1] = k / n;
        break;
    case LAB2_E_MLP_FORWARD: /* MLP (k, 2k) of max_tokens 4: five tokens */
        e.x[0] = 5, e.x[1] = k, e.y[0] = 5, e.y[1] = k;
        break;
    case LAB2_E_MLP_BACKWARD: /* after a valid forward of three tokens: dx one column too wide */
        e.x[0] = 3, e.x[1] = k, e.dy[0] = 3, e.dy[1] = k, e.dx[0] = 3, e.dx[1] = k + 1;
        break;
    case LAB2_E_MLP_BACKWARD_TOKENS: /* after a valid forward of x's first three rows: five tokens, one past max_tokens */
        e.x[0] = 5, e.x[1] = k, e.dy[0] = 5, e.dy[1] = k, e.dx[0] = 5, e.dx[1] = k;
        break;
    default: break; /* the inits get no tensor */
    }
    return e;
}

lab2_mlp lab2_mlp_of(const drv_case *c) {
    bool scaling = !strcmp(c->inst->test->name, "scaling"); /* arg = T, d, ffn; the others: bwd first */
    lab2_mlp s = {.bwd = !scaling && c->arg[0] != 0, .steps = !scaling && c->arg[4] > 1 ? (int)c->arg[4] : 1};
    const int64_t *a = scaling ? c->arg : c->arg + 1;
    s.T = a[0], s.d = a[1], s.f = a[2], s.fl = s.f / c->world;
    return s;
}

/* ---- the ideal step, as the cost model sees it -------------------------------------------- */

/* The ideal Megatron MLP step (forward + backward) at world n, per rank: forward fc1 GEMM,
 * bias, GELU, fc2 GEMM, one all-reduce, bias once after it; backward fc2 db, dW, dX GEMMs,
 * GELU', fc1 db, dW, dX GEMMs, one all-reduce. Kernels are priced as kernels/ records them. */
double lab2_ideal_step(const plc_profile *p, int64_t T, int64_t d, int64_t f, int n, plc_prediction *pred) {
    plc_list l = {0};
    double fl = (double)f / n, S = 4.0 * T * d, by, fo;
    for (int r = 0; r < n; r++) {
        plc_list_rank(&l, r, 0, n);
        plc_list_gemm(&l, T, fl, d); /* forward */
        kern_bias_cost((int)T, (int)fl, 0, &by, &fo), plc_list_op(&l, PL_OP_KERNEL, fo, by);
        kern_gelu_cost((size_t)(T * fl), 0, &by, &fo), plc_list_op(&l, PL_OP_KERNEL, fo, by);
        plc_list_gemm(&l, T, d, fl);
        plc_list_op(&l, PL_OP_ALLREDUCE, 0, S);
        kern_bias_cost((int)T, (int)d, 0, &by, &fo), plc_list_op(&l, PL_OP_KERNEL, fo, by);
        kern_bias_cost((int)T, (int)d, 1, &by, &fo), plc_list_op(&l, PL_OP_KERNEL, fo, by); /* backward */
        plc_list_gemm(&l, d, fl, T);
        plc_list_gemm(&l, T, fl, d);
        kern_gelu_cost((size_t)(T * fl), 1, &by, &fo), plc_list_op(&l, PL_OP_KERNEL, fo, by);
        kern_bias_cost((int)T, (int)fl, 1, &by, &fo), plc_list_op(&l, PL_OP_KERNEL, fo, by);
        plc_list_gemm(&l, fl, d, T);
        plc_list_gemm(&l, T, d, fl);
        plc_list_op(&l, PL_OP_ALLREDUCE, 0, S);
    }
    char err[200];
    plc_prediction tmp;
    int rc = plc_replay(p, l.ops, l.n, n, pred ? pred : &tmp, err, sizeof err);
    plc_list_free(&l);
    return rc == 0 ? (pred ? pred : &tmp)->step_time : -1;
}

/* ---- the plan ------------------------------------------------------------------------------ */

static void plan_linear(const drv_test *t, drv_plan *p) {
    static const int64_t SHAPES[5][3] = {{1, 16, 24}, {7, 32, 16}, {33, 24, 40}, {129, 128, 96}, {256, 512, 384}};
    /* in/out multiples of 8 divide by 1, 2, 4, 8 ranks; odd token counts and 1 token */
    int nshapes = strcmp(g_flags2.shapes, "small") ? 5 : 3;
    static const int KF[4][2] = {{LAB2_COLUMN, 0}, {LAB2_COLUMN, 1}, {LAB2_ROW, 1}, {LAB2_ROW, 0}};
    for (int i = 0; i < nshapes + 2; i++) {
        int k0 = i < nshapes ? 0 : i == nshapes ? 1 : 3, k1 = i < nshapes ? 4 : k0 + 1; /* then two without bias */
        const int64_t *sh = SHAPES[i < nshapes ? i : 1];
        for (int k = k0; k < k1; k++)
            for (int bwd = 0; bwd < 2; bwd++) {
                bool col = KF[k][0] == LAB2_COLUMN, bias = i < nshapes;
                drv_instance *in = drv_plan_add(p, t, "%s.%s.%s%s.T%lld.in%lld.out%lld", col ? "column" : "row",
                                                bwd ? "bwd" : "fwd",
                                                col ? (KF[k][1] ? "gather" : "split") : (KF[k][1] ? "parallel" : "full"),
                                                bias ? "" : ".nobias", (long long)sh[0], (long long)sh[1], (long long)sh[2]);
                snprintf(in->group, sizeof in->group, "%s.%s", col ? "column" : "row", bwd ? "bwd" : "fwd");
                int64_t a[7] = {KF[k][0], KF[k][1], bias, bwd, sh[0], sh[1], sh[2]};
                memcpy(in->arg, a, sizeof a);
            }
    }
    /* Two backward calls into the same gradients, from non-zero ones: they accumulate. */
    const int64_t *sh = SHAPES[1];
    for (int k = 0; k < 4; k++) {
        bool col = KF[k][0] == LAB2_COLUMN;
        drv_instance *in = drv_plan_add(p, t, "%s.bwd.%s.steps2.T%lld.in%lld.out%lld", col ? "column" : "row",
                                        col ? (KF[k][1] ? "gather" : "split") : (KF[k][1] ? "parallel" : "full"),
                                        (long long)sh[0], (long long)sh[1], (long long)sh[2]);
        snprintf(in->group, sizeof in->group, "%s.bwd", col ? "column" : "row");
        int64_t a[8] = {KF[k][0], KF[k][1], 1, 1, sh[0], sh[1], sh[2], 2};
        memcpy(in->arg, a, sizeof a);
    }
}

static void plan_mlp(const drv_test *t, drv_plan *p) {
    bool small = !strcmp(g_flags2.shapes, "small");
    /* the third: d = 13 divides by no world size but 1; only ffn is split */
    int64_t sh[3][3] = {{5, 16, 64}, {small ? 17 : 64, small ? 32 : 128, small ? 64 : 512}, {3, 13, 40}};
    for (int i = 0; i < 3; i++)
        for (int bwd = 0; bwd < 2; bwd++) {
            drv_instance *in = drv_plan_add(p, t, "mlp.%s.T%lld.d%lld.ffn%lld", bwd ? "bwd" : "fwd", (long long)sh[i][0],
                                            (long long)sh[i][1], (long long)sh[i][2]);
            snprintf(in->group, sizeof in->group, "mlp.%s", bwd ? "bwd" : "fwd");
            int64_t a[4] = {bwd, sh[i][0], sh[i][1], sh[i][2]};
            memcpy(in->arg, a, sizeof a);
        }
    /* two micro-batches: forward and backward twice, the gradients accumulating */
    drv_instance *in = drv_plan_add(p, t, "mlp.bwd.steps2.T%lld.d%lld.ffn%lld", (long long)sh[0][0],
                                    (long long)sh[0][1], (long long)sh[0][2]);
    snprintf(in->group, sizeof in->group, "mlp.bwd");
    int64_t a[5] = {1, sh[0][0], sh[0][1], sh[0][2], 2};
    memcpy(in->arg, a, sizeof a);
}

/* Every error return tp_linear.h documents, provoked: a split dimension that does not
 * divide (only at n > 1), and a tensor of the wrong shape for every call that takes one. */
static void plan_errors(const drv_test *t, drv_plan *p) {
    static const char *NAMES[LAB2_E_COUNT] = {
        "error.not_divisible.column", "error.not_divisible.row", "error.not_divisible.mlp",
        "error.shape.row_forward", "error.shape.column_forward", "error.shape.column_backward",
        "error.shape.row_backward", "error.shape.column_backward_dy", "error.shape.row_backward_dy",
        "error.shape.mlp_forward", "error.shape.mlp_backward", "error.shape.mlp_backward_tokens"};
    for (int i = pl_world() > 1 ? 0 : LAB2_E_ROW_FORWARD; i < LAB2_E_COUNT; i++) {
        drv_instance *in = drv_plan_add(p, t, "%s", NAMES[i]);
        in->arg[0] = i, in->arg[1] = i < LAB2_E_ROW_FORWARD ? LAB2_ERR_NOT_DIVISIBLE : LAB2_ERR_SHAPE;
    }
}

/* The plan is made before any player (and any device) exists, so the scaling case has one
 * shape on every machine: the measured basis (a GPU per rank) times it at this size too. */
static void plan_scaling(const drv_test *t, drv_plan *p) {
    bool small = !strcmp(g_flags2.shapes, "small");
    int64_t sh[3] = {small ? 16 : 64, small ? 64 : 256, small ? 256 : 1024};
    drv_instance *i = drv_plan_add(p, t, "scaling.mlp.T%lld.d%lld.ffn%lld", (long long)sh[0], (long long)sh[1],
                                   (long long)sh[2]);
    memcpy(i->arg, sh, sizeof sh);
}

static const drv_test TESTS[] = {
    {.name = "linear", .group = "linear", .plan = plan_linear, .setup = DRV_R(lin_setup), .check = DRV_R(lin_check),
     .model = DRV_R(lin_model), .teardown = DRV_R(lab2_teardown), .play = DRV_P(lin_play),
     .release = DRV_P(lab2_release)},
    {.name = "mlp", .group = "mlp", .plan = plan_mlp, .setup = DRV_R(mlp_setup), .check = DRV_R(mlp_check),
     .model = DRV_R(mlp_model), .teardown = DRV_R(lab2_teardown), .play = DRV_P(mlp_play),
     .release = DRV_P(lab2_release)},
    {.name = "errors", .group = "errors", .plan = plan_errors, .setup = DRV_R(err_setup), .check = DRV_R(err_check),
     .model = DRV_R(err_model), .teardown = DRV_R(lab2_teardown), .play = DRV_P(err_play),
     .release = DRV_P(lab2_release)},
    {.name = "scaling", .group = "scaling", .plan = plan_scaling, .setup = DRV_R(scal_setup),
     .check = DRV_R(scal_check), .model = DRV_R(scal_model), .perf = DRV_R(scal_perf), .refresh = DRV_R(scal_refresh),
     .verify = DRV_R(scal_verify), .teardown = DRV_R(scal_teardown), .play = DRV_P(scal_play),
     .timed = DRV_P(scal_timed), .release = DRV_P(lab2_release)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--shapes", DRV_STR, &g_flags2.shapes, 0, 0, "small|full: the case sizes (default full)"},
    {"--profile", DRV_STR, &g_flags2.profile, 0, 0, "NAME|FILE: cost-model profile for predictions (default dgx-h100)"},
    {"--this-profile", DRV_STR, &g_flags2.this_profile, 0, 0, "NAME|FILE: also predict the bench step with this profile"},
    {"--shape", DRV_STR, &g_flags2.shape, 0, 0, "T,D,FFN: the MLP step of --run scaling / bench (default 128,512,2048)"},
    {"--gemm-shape", DRV_STR, &g_flags2.gemm_shape, 0, 0,
     "T,IN,OUT: the column layer of --run bench (default 256,1024,2048)"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"scaling", "strong and weak scaling of the MLP step, measured and predicted (make scaling LAB=2)",
     DRV_P(mode_scaling), "1 2 4 8", "scripts/plot-scaling.sh"},
    {"bench", "the column layer vs pl_gemm of its shard; the cost model vs this machine (make bench LAB=2)",
     DRV_P(mode_bench), "1 2", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "02-tp-gemm",
    .title = "Lab 2: tensor-parallel linear layers and MLP",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(lab2_init),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
