/* lab02_perf.c - Lab 2's scaling: the scaling case (counted bytes, and the cost model's
 * prediction of the recorded step or, with a GPU per rank, a measurement), the ideal step
 * as an op list for the cost model, and the modes `--run scaling` and `--run bench`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bias.h" // defines: kern_bias_cost, kern_bias_forward/backward
#include "kern_gelu.h" // defines: kern_gelu_cost, kern_gelu_forward/backward
#include "lab02.h"

/* ---- the ideal step, as the cost model sees it --------------------------------------------- */

/* The ideal Megatron MLP step (forward + backward) at world n, per rank: forward fc1 GEMM,
 * bias, GELU, fc2 GEMM, one all-reduce, bias once after it; backward fc2 db, dW, dX GEMMs,
 * GELU', fc1 db, dW, dX GEMMs, one all-reduce. Kernels are priced as kernels/ records them. */
static double ideal_step(const plc_profile *p, int64_t T, int64_t d, int64_t f, int n, plc_prediction *pred) {
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

/* ---- the student's step, and the same work issued directly ---------------------------------- */

typedef struct {
    tp_mlp m;
    pl_tensor x, y, dy, dx;
    int64_t T, d, f;
    size_t first; /* the recorded step's first trace event */
} step;

static void step_run(void *arg) {
    step *a = arg;
    tp_mlp_forward(&a->m, a->x, a->y, NULL);
    tp_mlp_backward(&a->m, a->x, a->dy, a->dx, NULL);
}

/* The modes run the student's MLP: on the starter, say so, and how to see the reference. */
static void need_mlp(int rc) {
    if (rc != TP_OK)
        pl_usage_error("tp_mlp_init returned %d (%s): your tp_linear.c is not done yet; SOLUTION=1 runs the reference solution",
                       rc, tp_error_name(rc));
}

static int step_init(step *a, int64_t T, int64_t d, int64_t f) {
    memset(a, 0, sizeof *a);
    a->T = T, a->d = d, a->f = f;
    int rc = tp_mlp_init(&a->m, d, f, T, g_seed, MLP_ID, g_comm);
    a->x = make_input(T, d, 0, d, 0, X_ID), a->y = make_output(T, d);
    a->dy = make_input(T, d, 0, d, 0, DY_ID), a->dx = make_output(T, d);
    return rc;
}

static void step_free(step *a) {
    pl_free(a->x.data), pl_free(a->y.data), pl_free(a->dy.data), pl_free(a->dx.data);
    tp_mlp_free(&a->m);
}

/* The MLP step's work issued directly with library calls (its GEMMs, bias, GELU and
 * all-reduces), for the measured speed basis. Values are constants: only the time counts. */
typedef struct {
    int T, d, fl;
    float *buf[16];
} ref_step;
enum { RX, RY, RDY, RDX, RH, RA, RDA, RDH, RW1, RW2, RDW1, RDW2, RB1, RDB1, RB2, RDB2 };
static void ref_init(ref_step *m, int64_t T, int64_t d, int64_t fl) {
    m->T = (int)T, m->d = (int)d, m->fl = (int)fl;
    size_t n[16] = {T * d, T * d, T * d, T * d, T * fl, T * fl, T * fl, T * fl, fl * d, fl * d, fl * d, fl * d, fl, fl, d, d};
    for (int i = 0; i < 16; i++) {
        m->buf[i] = pl_malloc_floats(n[i]);
        pl_fill(m->buf[i], 0.01f, n[i], NULL);
    }
}
static void ref_free(ref_step *m) {
    for (int i = 0; i < 16; i++) pl_free(m->buf[i]);
}
static void ref_run(void *arg) {
    ref_step *m = arg;
    int T = m->T, d = m->d, fl = m->fl;
    float **b = m->buf;
    pl_gemm(false, true, T, fl, d, 1, b[RX], d, b[RW1], d, 0, b[RH], fl, NULL);
    kern_bias_forward(b[RH], b[RB1], T, fl, NULL);
    kern_gelu_forward(b[RA], b[RH], (size_t)T * fl, NULL);
    pl_gemm(false, true, T, d, fl, 1, b[RA], fl, b[RW2], fl, 0, b[RY], d, NULL);
    pl_allreduce(b[RY], b[RY], (size_t)T * d, PL_SUM, g_comm, NULL);
    kern_bias_forward(b[RY], b[RB2], T, d, NULL);
    kern_bias_backward(b[RDB2], b[RDY], T, d, NULL);
    pl_gemm(false, false, T, fl, d, 1, b[RDY], d, b[RW2], fl, 0, b[RDA], fl, NULL);
    pl_gemm(true, false, d, fl, T, 1, b[RDY], d, b[RA], fl, 1, b[RDW2], fl, NULL);
    kern_gelu_backward(b[RDH], b[RDA], b[RH], (size_t)T * fl, NULL);
    kern_bias_backward(b[RDB1], b[RDH], T, fl, NULL);
    pl_gemm(false, false, T, d, fl, 1, b[RDH], fl, b[RW1], d, 0, b[RDX], d, NULL);
    pl_gemm(true, false, fl, d, T, 1, b[RDH], fl, b[RX], d, 1, b[RDW1], d, NULL);
    pl_allreduce(b[RDX], b[RDX], (size_t)T * d, PL_SUM, g_comm, NULL);
}

/* One step recorded in the trace; its counters in *m; the slowest rank's fraction of the
 * step spent inside communication (the union of comm intervals within that same step,
 * so that overlapping events are not counted twice and the fraction cannot pass 1). */
static double record_step(step *a, pl_metrics *m) {
    pl_device_sync();
    pl_barrier(g_comm);
    a->first = pl_trace_count();
    double t0 = pl_trace_clock();
    drv_measure(step_run, a, m);
    double t1 = pl_trace_clock(), busy = 0, until = t0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = a->first; i < pl_trace_count(); i++) { /* events come in start order */
        if (ev[i].kind >= PL_OP_GEMM) continue;
        double s = ev[i].t_start > until ? ev[i].t_start : until, e = ev[i].t_end > t1 ? t1 : ev[i].t_end;
        if (e > s) busy += e - s, until = e;
    }
    return drv_max(t1 > t0 ? busy / (t1 - t0) : 0);
}

/* ---- the scaling case: arg = T, d, ffn ------------------------------------------------------- */

void plan_scaling(const drv_test *t, drv_plan *p) {
    const pl_runtime_info *in = pl_info();
    bool small = !strcmp(g_shapes, "small");
    int64_t sh[3] = {small ? 16 : 64, small ? 64 : 256, small ? 256 : 1024};
    /* A GPU per rank measures: a shape where the GEMMs, not the launches, take the time. */
    if (in->device == PL_DEVICE_CUDA && in->comm == PL_COMM_NCCL && !small) sh[0] = 1024, sh[1] = 1024, sh[2] = 4096;
    drv_instance *i = drv_plan_add(p, t, "scaling.mlp.T%lld.d%lld.ffn%lld", (long long)sh[0], (long long)sh[1], (long long)sh[2]);
    memcpy(i->arg, sh, sizeof sh);
}

void scal_setup(drv_case *c) {
    step *a = drv_state(c, sizeof *a);
    api_ok(c, step_init(a, c->arg[0], c->arg[1], c->arg[2]), "tp_mlp_init");
}

void scal_run(drv_case *c) {
    step *a = c->state;
    a->first = pl_trace_count();
    step_run(a);
}

void scal_check(drv_case *c) {
    step *a = c->state;
    if (!c->ran) return;
    int64_t T = a->T, d = a->d, f = a->f;
    const pl_metrics *mt = &c->m;
    /* Counted: ring-equivalent bytes per rank of the step's collectives (REFERENCE.md). */
    double ar = drv_max((double)mt->coll_calls[PL_OP_ALLREDUCE]), ag = drv_max((double)mt->coll_calls[PL_OP_ALLGATHER]);
    double calls = drv_max((double)mt->coll_total), S = drv_max((double)mt->coll_bytes);
    double S_ar = ar > 0 ? S * ar / (ar + ag) : 0, S_ag = S - S_ar; /* exact when only one kind */
    double measured = 2.0 * (g_n - 1) / g_n * S_ar + (double)(g_n - 1) / g_n * S_ag + drv_max((double)mt->bytes_sent);
    double optimal = 2 * (2.0 * (g_n - 1) / g_n * 4.0 * T * d);
    drv_num(c, "bytes", 4.0 * T * d);
    drv_num(c, "bytes_per_rank", measured);
    drv_num(c, "bytes_optimal", optimal);
    drv_num(c, "bytes_ratio", measured > 0 ? optimal / measured : (optimal > 0 ? 0 : 1));
    drv_num(c, "lib_calls", calls);
    const pl_runtime_info *in = pl_info();
    if (in->device == PL_DEVICE_CUDA && in->comm == PL_COMM_NCCL) {
        /* Measured: the student's step against the same work issued directly, timed alike. */
        pl_timing ts = drv_time(step_run, a, 3, 15);
        ref_step ref;
        ref_init(&ref, T, d, f / g_n);
        pl_timing tr = drv_time(ref_run, &ref, 3, 15);
        ref_free(&ref);
        double ratio = ts.median_us > 0 ? tr.median_us / ts.median_us : 0;
        drv_num(c, "time_us", ts.median_us);
        drv_num(c, "speed_ratio", ratio);
        drv_note(c, "basis: measured (a GPU per rank): step %.1f us vs %.1f us for the same GEMMs, kernels and all-reduces (ratio %.2f); counted bytes %.0f vs optimal %.0f",
                 ts.median_us, tr.median_us, ratio, measured, optimal);
    } else if (g_have_prof) {
        plc_prediction ps, pi;
        char err[200] = "";
        int rc = plc_replay_trace(&g_prof, a->first, g_comm, &ps, err, sizeof err);
        double ideal = ideal_step(&g_prof, T, d, f, g_n, &pi);
        if (rc != 0 || ideal < 0) {
            drv_error(c, "cost model could not replay the step: %s", err);
        } else {
            double ratio = ps.step_time > 0 ? ideal / ps.step_time : 0;
            drv_num(c, "pred_time_us", ps.step_time * 1e6);
            drv_num(c, "pred_ideal_us", ideal * 1e6);
            drv_num(c, "pred_comm_fraction", ps.comm_fraction);
            drv_num(c, "speed_ratio", ratio > 1 ? 1 : ratio);
            drv_note(c, "basis: counted bytes + predicted (profile %s; no GPU per rank): bytes/rank %.0f vs optimal %.0f; predicted step %.1f us vs ideal %.1f us, comm %.0f%%",
                     g_prof.name, measured, optimal, ps.step_time * 1e6, ideal * 1e6, 100 * ps.comm_fraction);
        }
    } else {
        drv_error(c, "no cost-model profile (--profile NAME): cannot predict");
    }
    /* The step itself must be right in its communication: exactly one all-reduce each way. */
    if (g_n > 1 && (ar != 2 || ag != 0 || calls != 2))
        drv_fail(c, "the MLP step issued %.0f all-reduce + %.0f all-gather (%.0f collectives), expected 2 + 0", ar, ag, calls);
}

void scal_teardown(drv_case *c) { step_free(c->state); }

/* ---- modes ------------------------------------------------------------------------------------ */

static void parse_shape(const char *spec, int64_t *T, int64_t *d, int64_t *f) {
    long long a = 128, b = 512, e = 2048;
    if (spec && (sscanf(spec, "%lld,%lld,%lld", &a, &b, &e) != 3 || a < 1 || b < 1 || e < 1))
        pl_usage_error("--shape/--gemm-shape want three positive integers (T,D,FFN or T,IN,OUT), got '%s'", spec);
    *T = a, *d = b, *f = e;
}

/* One measured and predicted step: a `scaling` line (scripts/plot-scaling.sh reads them). */
static int scaling_line(const char *kind, int64_t T, int64_t d, int64_t f) {
    if (f % g_n) pl_usage_error("--shape: ffn %lld is not divisible by %d ranks", (long long)f, g_n);
    step a;
    need_mlp(step_init(&a, T, d, f));
    pl_timing t = drv_time(step_run, &a, 1, 5);
    pl_metrics m;
    double comm_frac = record_step(&a, &m);
    plc_prediction pp = {0}, pt = {0};
    char err[200] = "";
    double pred = -1, pred_this = -1, ideal = g_have_prof ? ideal_step(&g_prof, T, d, f, g_n, NULL) : -1;
    if (g_have_prof && plc_replay_trace(&g_prof, a.first, g_comm, &pp, err, sizeof err) == 0) pred = pp.step_time;
    plc_profile tp;
    if (g_this_profile && plc_profile_load(&tp, g_this_profile, err, sizeof err) == 0 &&
        plc_replay_trace(&tp, a.first, g_comm, &pt, err, sizeof err) == 0)
        pred_this = pt.step_time;
    drv_say("scaling kind=%s np=%d T=%lld d=%lld ffn=%lld time_us=%.1f min_us=%.1f flops_per_rank=%.0f comm_frac=%.4f "
            "pred_us=%.3f pred_comm_frac=%.4f ideal_us=%.3f pred_this_us=%.1f profile=%s device=%s\n",
            kind, g_n, (long long)T, (long long)d, (long long)f, t.median_us, t.min_us, drv_max(m.gemm_flops), comm_frac,
            pred * 1e6, pp.comm_fraction, ideal * 1e6, pred_this * 1e6, g_have_prof ? g_prof.name : "-",
            pl_device_name(pl_info()->device));
    step_free(&a);
    return 0;
}

/* make scaling LAB=2: strong (the shape as given) and weak (ffn x ranks) at this world size;
 * at one rank also the profile's prediction of the ideal step up to its largest world. */
int mode_scaling(void) {
    int64_t T, d, f;
    parse_shape(g_shape, &T, &d, &f);
    if (!g_this_profile && pl_info()->device == PL_DEVICE_CPU) g_this_profile = "this-machine";
    scaling_line("strong", T, d, f);
    scaling_line("weak", T, d, f / 4 * g_n);
    if (g_n != 1 || !g_have_prof) return 0;
    double t1 = ideal_step(&g_prof, T, d, f, 1, NULL);
    for (int n = 1; n <= g_prof.gpus_per_node * g_prof.nodes && n <= 64; n *= 2) {
        if (f % n) continue;
        plc_prediction ps, pw;
        double ts = ideal_step(&g_prof, T, d, f, n, &ps), tw = ideal_step(&g_prof, T, d, f / 4 * n, n, &pw);
        drv_say("predict profile=%s np=%d strong_us=%.3f strong_eff=%.4f strong_comm_frac=%.4f weak_us=%.3f weak_eff=%.4f weak_comm_frac=%.4f\n",
                g_prof.name, n, ts * 1e6, t1 / (n * ts), ps.comm_fraction, tw * 1e6,
                ideal_step(&g_prof, T, d, f / 4, 1, NULL) / tw, pw.comm_fraction);
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
    int64_t T, in, out, sT, sd, sf;
    parse_shape(g_gemm_shape ? g_gemm_shape : "256,1024,2048", &T, &in, &out);
    parse_shape(g_shape, &sT, &sd, &sf);
    tp_linear l;
    memset(&l, 0, sizeof l);
    if (out % g_n) pl_usage_error("--gemm-shape: out %lld is not divisible by %d ranks", (long long)out, g_n);
    int rc = tp_linear_init(&l, TP_COLUMN, in, out, false, g_seed, W_ID, g_comm);
    if (rc != TP_OK)
        pl_usage_error("tp_linear_init returned %d (%s): your tp_linear.c is not done yet; SOLUTION=1 runs the reference solution",
                       rc, tp_error_name(rc));
    int64_t ol = out / g_n;
    pl_tensor x = make_input(T, in, 0, in, 0, X_ID), y = make_output(T, ol);
    float *y2 = pl_malloc_floats((size_t)(T * ol));
    int iters = drv_opts()->iters > 0 ? drv_opts()->iters : 9;
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
    drv_say("ratio tp column forward %lldx%lldx%lld at np %d (per rank %lldx%lldx%lld): pl_gemm / sharded layer  %6.3f   (layer %.1f us, pl_gemm %.1f us, target >= 0.9)\n",
            (long long)T, (long long)in, (long long)out, g_n, (long long)T, (long long)in, (long long)ol, a > 0 ? b / a : 0,
            a * 1e6, b * 1e6);
    free(ta), free(tb), pl_free(y2), pl_free(x.data), pl_free(y.data);
    tp_linear_free(&l);
    step s;
    if (sf % g_n) pl_usage_error("--shape: ffn %lld is not divisible by %d ranks", (long long)sf, g_n);
    need_mlp(step_init(&s, sT, sd, sf));
    pl_timing t = drv_time(step_run, &s, 1, 5);
    pl_metrics m;
    record_step(&s, &m);
    plc_profile tp;
    plc_prediction pt;
    char err[200];
    if (plc_profile_load(&tp, g_this_profile ? g_this_profile : "this-machine", err, sizeof err) == 0 &&
        plc_replay_trace(&tp, s.first, g_comm, &pt, err, sizeof err) == 0)
        drv_say("ratio cost model (%s) np %d, Lab 2 MLP step %lldx%lldx%lld: predicted / measured  %6.3f   (predicted %.0f us, measured %.0f us, target 0.75..1.25)\n",
                tp.name, g_n, (long long)sT, (long long)sd, (long long)sf, pt.step_time * 1e6 / t.median_us, pt.step_time * 1e6,
                t.median_us);
    else
        drv_say("# cost model vs this machine: %s\n", err);
    step_free(&s);
    return 0;
}
