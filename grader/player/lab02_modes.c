/* lab02_modes.c (player) - Lab 2's modes, the student's program run alone (no referee):
 * `--run scaling` (make scaling LAB=2: strong and weak scaling of the MLP step, measured
 * and predicted) and `--run bench` (make bench LAB=2: the column layer against pl_gemm of
 * its shard; the cost model of this machine against the measured step). Nothing here is
 * graded: the numbers are this process's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02_play.h"

static plc_profile g_prof;
static bool g_have_prof;

static void load_profile(void) {
    char err[256];
    const lab2_flags *f = lab2_opts();
    g_have_prof = plc_profile_load(&g_prof, f->profile, err, sizeof err) == 0;
    if (!g_have_prof && strcmp(f->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
}

/* A device tensor [rows x cols] filled from the counter RNG (this process's seed). */
static pl_tensor make_input(int64_t rows, int64_t cols, uint64_t id) {
    pl_tensor t = pl_tensor_view(pl_malloc_floats((size_t)(rows * cols) + 1), rows, cols);
    if (rows && cols) pl_rng_fill(t, cols, 0, 0, pl_info()->seed, id, PL_RNG_NORMAL, 0, 1);
    return t;
}
static pl_tensor make_output(int64_t rows, int64_t cols) {
    pl_tensor t = pl_tensor_view(pl_malloc_floats((size_t)(rows * cols) + 1), rows, cols);
    pl_poison(t.data, (size_t)(rows * cols), NULL);
    return t;
}

/* The modes run the student's MLP: on the starter, say so, and how to see the reference. */
static void need_mlp(int rc) {
    if (rc != TP_OK)
        pl_usage_error("tp_mlp_init returned %d (%s): your tp_linear.c is not done yet; SOLUTION=1 runs the reference "
                       "solution", rc, tp_error_name(rc));
}

static int step_init(lab2_step *a, int64_t T, int64_t d, int64_t f) {
    memset(a, 0, sizeof *a);
    int rc = tp_mlp_init(&a->m, d, f, T, pl_info()->seed, LAB2_MLP_ID, pl_comm_world());
    a->x = make_input(T, d, LAB2_X_ID), a->y = make_output(T, d);
    a->dy = make_input(T, d, LAB2_DY_ID), a->dx = make_output(T, d);
    return rc;
}

static void step_free(lab2_step *a) {
    pl_free(a->x.data), pl_free(a->y.data), pl_free(a->dy.data), pl_free(a->dx.data);
    tp_mlp_free(&a->m);
}

/* One step recorded in the trace from *first; its counters in *m; the slowest rank's
 * fraction of the step spent inside communication (the union of comm intervals within
 * that same step, so that overlapping events are not counted twice and the fraction
 * cannot pass 1). */
static double record_step(lab2_step *a, pl_metrics *m, size_t *first) {
    pl_device_sync();
    pl_barrier(pl_comm_world());
    *first = pl_trace_count();
    double t0 = pl_trace_clock();
    drv_measure(lab2_step_run, a, m);
    double t1 = pl_trace_clock(), busy = 0, until = t0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = *first; i < pl_trace_count(); i++) { /* events come in start order */
        if (ev[i].kind >= PL_OP_GEMM) continue;
        double s = ev[i].t_start > until ? ev[i].t_start : until, e = ev[i].t_end > t1 ? t1 : ev[i].t_end;
        if (e > s) busy += e - s, until = e;
    }
    return drv_max(t1 > t0 ? busy / (t1 - t0) : 0);
}

static void parse_shape(const char *spec, int64_t *T, int64_t *d, int64_t *f) {
    long long a = 128, b = 512, e = 2048;
    if (spec && (sscanf(spec, "%lld,%lld,%lld", &a, &b, &e) != 3 || a < 1 || b < 1 || e < 1))
        pl_usage_error("--shape/--gemm-shape want three positive integers (T,D,FFN or T,IN,OUT), got '%s'", spec);
    *T = a, *d = b, *f = e;
}

/* One measured and predicted step: a `scaling` line (scripts/plot-scaling.sh reads them). */
static int scaling_line(const char *kind, int64_t T, int64_t d, int64_t f, const char *this_profile) {
    int n = pl_world();
    if (f % n) pl_usage_error("--shape: ffn %lld is not divisible by %d ranks", (long long)f, n);
    lab2_step a;
    need_mlp(step_init(&a, T, d, f));
    pl_timing t = pl_time(lab2_step_run, &a, 1, 5, pl_comm_world());
    pl_metrics m;
    size_t first;
    double comm_frac = record_step(&a, &m, &first);
    plc_prediction pp = {0}, pt = {0};
    char err[200] = "";
    double pred = -1, pred_this = -1, ideal = g_have_prof ? lab2_ideal_step(&g_prof, T, d, f, n, NULL) : -1;
    if (g_have_prof && plc_replay_trace(&g_prof, first, pl_comm_world(), &pp, err, sizeof err) == 0) pred = pp.step_time;
    plc_profile tp;
    if (this_profile && plc_profile_load(&tp, this_profile, err, sizeof err) == 0 &&
        plc_replay_trace(&tp, first, pl_comm_world(), &pt, err, sizeof err) == 0)
        pred_this = pt.step_time;
    drv_say("scaling kind=%s np=%d T=%lld d=%lld ffn=%lld time_us=%.1f min_us=%.1f flops_per_rank=%.0f comm_frac=%.4f "
            "pred_us=%.3f pred_comm_frac=%.4f ideal_us=%.3f pred_this_us=%.1f profile=%s device=%s\n",
            kind, n, (long long)T, (long long)d, (long long)f, t.median_us, t.min_us, drv_max(m.gemm_flops),
            comm_frac, pred * 1e6, pp.comm_fraction, ideal * 1e6, pred_this * 1e6, g_have_prof ? g_prof.name : "-",
            pl_device_name(pl_info()->device));
    step_free(&a);
    return 0;
}

/* make scaling LAB=2: strong (the shape as given) and weak (ffn x ranks) at this world size;
 * at one rank also the profile's prediction of the ideal step up to its largest world. */
int mode_scaling(void) {
    int64_t T, d, f;
    int n = pl_world();
    load_profile();
    parse_shape(lab2_opts()->shape, &T, &d, &f);
    const char *this_profile = lab2_opts()->this_profile;
    if (!this_profile && pl_info()->device == PL_DEVICE_CPU) this_profile = "this-machine";
    scaling_line("strong", T, d, f, this_profile);
    scaling_line("weak", T, d, f / 4 * n, this_profile);
    if (n != 1 || !g_have_prof) return 0;
    for (int k = 1; k <= g_prof.gpus_per_node * g_prof.nodes && k <= 64; k *= 2) {
        if (f % k) continue;
        plc_prediction ps, pw;
        double t1 = lab2_ideal_step(&g_prof, T, d, f, 1, NULL);
        double ts = lab2_ideal_step(&g_prof, T, d, f, k, &ps), tw = lab2_ideal_step(&g_prof, T, d, f / 4 * k, k, &pw);
        drv_say("predict profile=%s np=%d strong_us=%.3f strong_eff=%.4f strong_comm_frac=%.4f weak_us=%.3f "
                "weak_eff=%.4f weak_comm_frac=%.4f\n",
                g_prof.name, k, ts * 1e6, t1 / (k * ts), ps.comm_fraction, tw * 1e6,
                lab2_ideal_step(&g_prof, T, d, f / 4, 1, NULL) / tw, pw.comm_fraction);
    }
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* make bench LAB=2: the column layer's forward (no bias, no gather: one GEMM per rank)
 * against an unsharded pl_gemm of the same per-rank shape, interleaved; then the cost
 * model of this machine against the measured MLP step. */
int mode_bench(void) {
    int n = pl_world();
    int64_t T, in, out, sT, sd, sf;
    const lab2_flags *fl = lab2_opts();
    parse_shape(fl->gemm_shape ? fl->gemm_shape : "256,1024,2048", &T, &in, &out);
    parse_shape(fl->shape, &sT, &sd, &sf);
    tp_linear l;
    memset(&l, 0, sizeof l);
    if (out % n) pl_usage_error("--gemm-shape: out %lld is not divisible by %d ranks", (long long)out, n);
    int rc = tp_linear_init(&l, TP_COLUMN, in, out, false, pl_info()->seed, LAB2_W_ID, pl_comm_world());
    if (rc != TP_OK)
        pl_usage_error("tp_linear_init returned %d (%s): your tp_linear.c is not done yet; SOLUTION=1 runs the "
                       "reference solution", rc, tp_error_name(rc));
    int64_t ol = out / n;
    pl_tensor x = make_input(T, in, LAB2_X_ID), y = make_output(T, ol);
    float *y2 = pl_malloc_floats((size_t)(T * ol));
    int iters = drv_opts()->iters > 0 ? drv_opts()->iters : 9;
    double *ta = calloc((size_t)iters, sizeof *ta), *tb = calloc((size_t)iters, sizeof *tb);
    PL_CHECK(ta && tb, "out of host memory");
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
    drv_say("ratio tp column forward %lldx%lldx%lld at np %d (per rank %lldx%lldx%lld): pl_gemm / sharded layer  %6.3f   "
            "(layer %.1f us, pl_gemm %.1f us, target >= 0.9)\n",
            (long long)T, (long long)in, (long long)out, n, (long long)T, (long long)in, (long long)ol, a > 0 ? b / a : 0,
            a * 1e6, b * 1e6);
    free(ta), free(tb), pl_free(y2), pl_free(x.data), pl_free(y.data);
    tp_linear_free(&l);
    lab2_step s;
    if (sf % n) pl_usage_error("--shape: ffn %lld is not divisible by %d ranks", (long long)sf, n);
    need_mlp(step_init(&s, sT, sd, sf));
    pl_timing t = pl_time(lab2_step_run, &s, 1, 5, pl_comm_world());
    pl_metrics m;
    size_t first;
    record_step(&s, &m, &first);
    plc_profile tp;
    plc_prediction pt;
    char err[200];
    if (plc_profile_load(&tp, fl->this_profile ? fl->this_profile : "this-machine", err, sizeof err) == 0 &&
        plc_replay_trace(&tp, first, pl_comm_world(), &pt, err, sizeof err) == 0)
        drv_say("ratio cost model (%s) np %d, Lab 2 MLP step %lldx%lldx%lld: predicted / measured  %6.3f   (predicted "
                "%.0f us, measured %.0f us, target 0.75..1.25)\n",
                tp.name, n, (long long)sT, (long long)sd, (long long)sf, pt.step_time * 1e6 / t.median_us,
                pt.step_time * 1e6, t.median_us);
    else
        drv_say("# cost model vs this machine: %s\n", err);
    step_free(&s);
    return 0;
}
