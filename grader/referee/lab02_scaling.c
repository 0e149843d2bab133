/* lab02_scaling.c (referee) - Lab 2's scaling case: the MLP step's counted bytes against the
 * formula, and its speed: predicted by the cost model from the step the player recorded
 * (no GPU per rank), or measured by the referee against the same work issued directly
 * (a GPU per rank: cuda + nccl), every timed run on fresh inputs and spot-checked.
 *
 * Rubric items scaling.bytes and the comm check rest on the player's counters of the step;
 * scaling.speed on the predicted basis rests on the player's trace of it (its operations,
 * sizes and order), on the measured basis on the referee's clock.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"

#define SPOT_ROWS 2 /* tokens of y and dx checked after each timed run */

typedef struct {
    float *x, *dy; /* the current run's inputs [T x d] */
    double bytes_measured, bytes_optimal;
} scal_state;

static void write_inputs(drv_case *c, const lab2_mlp *s, int run) {
    scal_state *k = ((lab2_case *)c->state)->scaling;
    uint64_t seed = drv_case_seed(c, LAB2_SECRET, run);
    free(k->x), free(k->dy);
    k->x = lab2_master(s->T, s->d, seed, LAB2_X_ID, false, 0);
    k->dy = lab2_master(s->T, s->d, seed, LAB2_DY_ID, false, 0);
    memcpy(drv_slot_host(c, "x"), k->x, (size_t)(s->T * s->d) * sizeof(float));
    memcpy(drv_slot_host(c, "dy"), k->dy, (size_t)(s->T * s->d) * sizeof(float));
}

void scal_setup(drv_case *c) {
    lab2_mlp s = lab2_mlp_of(c);
    lab2_case *st = drv_state(c, sizeof *st);
    st->scaling = calloc(1, sizeof(scal_state));
    PL_CHECK(st->scaling != NULL, "out of host memory");
    uint64_t *seed = drv_slot_new(c, "iseed", sizeof(uint64_t), DRV_IN | DRV_CONST);
    *seed = drv_case_seed(c, LAB2_INIT, 0);
    drv_slot_new(c, "status", sizeof(lab2_status), DRV_OUT | DRV_ZEROED);
    drv_counters_slot(c, "counters");
    lab2_mlp_shard_slots(c, &s, drv_case_seed(c, LAB2_SECRET, 0));
    size_t act = (size_t)(s.T * s.d) * sizeof(float);
    drv_slot_new(c, "x", act, DRV_IN | DRV_CONST);
    drv_slot_new(c, "dy", act, DRV_IN | DRV_CONST);
    drv_slot_new(c, "y", act, DRV_OUT);
    drv_slot_new(c, "dx", act, DRV_OUT);
    drv_slot_new(c, "trace", sizeof(lab2_trace), DRV_OUT | DRV_ZEROED);
    write_inputs(c, &s, 0);
}

/* Every rank's recorded operations of the step (the players' claims, checked for sanity so
 * that the replay computes on numbers it understands), replayed over the world. */
static int replay_step(drv_case *c, const plc_profile *prof, plc_prediction *out, char *err, size_t errlen) {
    const lab2_trace *tr = drv_slot_host(c, "trace");
    int64_t mine = tr->n < 0 ? 0 : tr->n;
    double most = drv_max((double)mine);
    if (most > LAB2_TRACE_OPS) {
        snprintf(err, errlen, "the step recorded %.0f operations on one rank, more than the %d replayed", most,
                 LAB2_TRACE_OPS);
        return -1;
    }
    size_t cap = (size_t)most, one = sizeof(int64_t) + cap * sizeof(plc_op), world = (size_t)c->world;
    char *blob = calloc(1, one), *all = malloc(one * world);
    plc_op *ops = malloc((cap * world + 1) * sizeof *ops);
    PL_CHECK(blob && all && ops, "out of host memory");
    memcpy(blob, &mine, sizeof mine);
    memcpy(blob + sizeof mine, tr->ops, (size_t)mine * sizeof(plc_op));
    drv_allgather(blob, one, all);
    size_t total = 0;
    int bad = -1;
    for (int r = 0; r < c->world; r++) {
        int64_t n;
        memcpy(&n, all + (size_t)r * one, sizeof n);
        for (int64_t i = 0; i < n && (size_t)i < cap; i++) {
            plc_op o;
            memcpy(&o, all + (size_t)r * one + sizeof n + (size_t)i * sizeof o, sizeof o);
            o.rank = r;
            bool ok = (int)o.kind >= 0 && o.kind < PL_OP_COUNT && (o.stream == 0 || o.stream == 1) &&
                      o.comm_size >= 1 && o.comm_size <= c->world && o.comm_id >= 0 && o.peer >= -1 &&
                      o.peer < o.comm_size && isfinite(o.bytes) && o.bytes >= 0 && isfinite(o.flops) &&
                      o.flops >= 0 && isfinite(o.t_start) && isfinite(o.t_end) && o.after >= 0 &&
                      (o.explicit_deps == 0 || o.explicit_deps == 1);
            if (!ok && bad < 0) bad = r;
            ops[total++] = o;
        }
    }
    int rc = -1;
    if (bad >= 0) snprintf(err, errlen, "rank %d's trace of the step is malformed", bad);
    else rc = plc_replay(prof, ops, total, c->world, out, err, errlen);
    free(blob), free(all), free(ops);
    return rc;
}

static bool gpu_per_rank(void) {
    pl_device_kind dev;
    pl_comm_kind comm;
    drv_player_backends(&dev, &comm);
    return dev == PL_DEVICE_CUDA && comm == PL_COMM_NCCL;
}

void scal_check(drv_case *c) {
    if (!c->ran) return;
    lab2_mlp s = lab2_mlp_of(c);
    lab2_status ps;
    memcpy(&ps, drv_slot_host(c, "status"), sizeof ps);
    if (!drv_all_ok(c, ps.init_rc, "tp_mlp_init", lab2_error_name)) return;
    if (!drv_check_all(c, ps.called != 0, "tp_mlp_init: the layers' shards or gradients are not shaped as tp_linear.h says"))
        return;
    drv_use_counters(c, "counters");
    int n = c->world;
    int64_t T = s.T, d = s.d, f = s.f;
    const pl_metrics *mt = &c->m;
    /* Counted: ring-equivalent bytes per rank of the step's collectives (REFERENCE.md). */
    double ar = drv_max((double)mt->coll_calls[PL_OP_ALLREDUCE]), ag = drv_max((double)mt->coll_calls[PL_OP_ALLGATHER]);
    double calls = drv_max((double)mt->coll_total), S = drv_max((double)mt->coll_bytes);
    double S_ar = ar > 0 ? S * ar / (ar + ag) : 0, S_ag = S - S_ar; /* exact when only one kind */
    double measured = 2.0 * (n - 1) / n * S_ar + (double)(n - 1) / n * S_ag + drv_max((double)mt->bytes_sent);
    double optimal = 2 * (2.0 * (n - 1) / n * 4.0 * T * d);
    scal_state *k = ((lab2_case *)c->state)->scaling;
    k->bytes_measured = measured, k->bytes_optimal = optimal;
    drv_num(c, "bytes", 4.0 * T * d);
    drv_num(c, "bytes_per_rank", measured);
    drv_num(c, "bytes_optimal", optimal);
    drv_num(c, "bytes_ratio", measured > 0 ? optimal / measured : (optimal > 0 ? 0 : 1));
    drv_num(c, "lib_calls", calls);
    const plc_profile *prof = lab2_profile();
    if (gpu_per_rank()) {
        /* measured in perf(), which runs when the case passes */
    } else if (prof) {
        plc_prediction ps_, pi;
        char err[200] = "";
        int rc = replay_step(c, prof, &ps_, err, sizeof err);
        double ideal = lab2_ideal_step(prof, T, d, f, n, &pi);
        if (rc != 0 || ideal < 0) {
            drv_error(c, "cost model could not replay the step: %s", err);
        } else {
            double ratio = ps_.step_time > 0 ? ideal / ps_.step_time : 0;
            drv_num(c, "pred_time_us", ps_.step_time * 1e6);
            drv_num(c, "pred_ideal_us", ideal * 1e6);
            drv_num(c, "pred_comm_fraction", ps_.comm_fraction);
            drv_num(c, "speed_ratio", ratio > 1 ? 1 : ratio);
            drv_note(c, "basis: counted bytes + predicted (profile %s; no GPU per rank): bytes/rank %.0f vs optimal "
                        "%.0f; predicted step %.1f us vs ideal %.1f us, comm %.0f%%",
                     prof->name, measured, optimal, ps_.step_time * 1e6, ideal * 1e6, 100 * ps_.comm_fraction);
        }
    } else {
        drv_error(c, "no cost-model profile (--profile NAME): cannot predict");
    }
    /* The step itself must be right in its communication: exactly one all-reduce each way. */
    if (n > 1 && (ar != 2 || ag != 0 || calls != 2))
        drv_fail(c, "the MLP step issued %.0f all-reduce + %.0f all-gather (%.0f collectives), expected 2 + 0", ar, ag,
                 calls);
}

/* The step's counters are judged in check(); what the runner adds: the player's counters
 * against its wire, and its device memory back where it was after tp_mlp_free. */
void scal_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}

/* Measured (a GPU per rank): the student's step against the same GEMMs, kernels and
 * all-reduces issued directly, timed alike by the referee. */
void scal_perf(drv_case *c) {
    if (!gpu_per_rank()) return;
    scal_state *k = ((lab2_case *)c->state)->scaling;
    static const int both[2] = {0, 1}; /* the student's step, the library's, interleaved */
    pl_timing tm[2];
    drv_time_players(c, both, 2, 3, 15, tm);
    if (drv_failed(c)) return;
    pl_timing ts = tm[0], tr = tm[1];
    double ratio = ts.median_us > 0 ? tr.median_us / ts.median_us : 0;
    drv_num(c, "time_us", ts.median_us);
    drv_num(c, "speed_ratio", ratio);
    drv_note(c, "basis: measured (a GPU per rank): step %.1f us vs %.1f us for the same GEMMs, kernels and all-reduces "
                "(ratio %.2f); counted bytes %.0f vs optimal %.0f",
             ts.median_us, tr.median_us, ratio, k->bytes_measured, k->bytes_optimal);
}

void scal_teardown(drv_case *c) {
    lab2_case *st = c->state;
    scal_state *k = st ? st->scaling : NULL;
    if (k) free(k->x), free(k->dy);
    lab2_teardown(c);
}

void scal_refresh(drv_case *c, int run) {
    lab2_mlp s = lab2_mlp_of(c);
    write_inputs(c, &s, run);
}

/* One token of the serial MLP (forward and backward: tokens are independent). */
static void token_ref(const lab2_case *st, const lab2_mlp *s, const float *x, const float *dy, double *y, double *dx) {
    int64_t d = s->d, f = s->f;
    double *h = malloc((size_t)f * sizeof *h), *da = malloc((size_t)f * sizeof *da);
    PL_CHECK(h && da, "out of host memory");
    for (int64_t o = 0; o < f; o++) {
        double acc = st->B1[o];
        for (int64_t i = 0; i < d; i++) acc += (double)x[i] * st->W1[o * d + i];
        h[o] = acc;
    }
    for (int64_t o = 0; o < d; o++) {
        double acc = st->B2[o];
        for (int64_t i = 0; i < f; i++) {
            double a = 0.5 * h[i] * (1 + tanh(0.7978845608028654 * (h[i] + 0.044715 * h[i] * h[i] * h[i])));
            acc += a * st->W2[o * f + i];
        }
        y[o] = acc;
    }
    for (int64_t i = 0; i < f; i++) {
        double acc = 0, u = 0.7978845608028654 * (h[i] + 0.044715 * h[i] * h[i] * h[i]), t = tanh(u);
        for (int64_t o = 0; o < d; o++) acc += (double)dy[o] * st->W2[o * f + i];
        da[i] = acc * (0.5 * (1 + t) + 0.5 * h[i] * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * h[i] * h[i]));
    }
    for (int64_t j = 0; j < d; j++) {
        double acc = 0;
        for (int64_t i = 0; i < f; i++) acc += da[i] * st->W1[i * d + j];
        dx[j] = acc;
    }
    free(h), free(da);
}

/* The student's timed step: y and dx of SPOT_ROWS tokens chosen after the run. */
void scal_verify(drv_case *c, int run) {
    lab2_case *st = c->state;
    scal_state *k = st->scaling;
    if (c->timing != 0) return; /* the library's step writes no slot */
    lab2_mlp s = lab2_mlp_of(c);
    const float *y = drv_slot_host(c, "y"), *dx = drv_slot_host(c, "dx");
    double *ey = malloc((size_t)s.d * sizeof *ey), *edx = malloc((size_t)s.d * sizeof *edx);
    PL_CHECK(ey && edx, "out of host memory");
    for (int r = 0; r < SPOT_ROWS && !drv_failed(c); r++) {
        int64_t t = (int64_t)(drv_unpredictable() % (uint64_t)s.T);
        token_ref(st, &s, k->x + t * s.d, k->dy + t * s.d, ey, edx);
        double num = 0, den = 0;
        for (int64_t j = 0; j < s.d; j++) {
            double a = (double)y[t * s.d + j] - ey[j], b = (double)dx[t * s.d + j] - edx[j];
            num += a * a + b * b, den += ey[j] * ey[j] + edx[j] * edx[j];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (!(rel <= drv_tolerance()))
            drv_fail(c, "timed run %d: token %lld of y and dx: relative error %.3g > %.0e (a result computed once and "
                        "repeated?)", run, (long long)t, rel, drv_tolerance());
    }
    free(ey), free(edx);
}
