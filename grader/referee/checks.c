/* checks.c - the checks every lab's referee makes, written once with one message style:
 *
 *   WHAT: relative error E > tolerance T (worst element here [r, c]: got G, expected W)
 *   WHAT, step S: G vs the reference's W: relative error E > tolerance T
 *   WHAT returned R (NAME), expected W (NAME)
 *   WHAT: 2 all-reduce (S = 4096 bytes), expected 3 all-reduce (S = 6144 bytes)
 *   WHAT: 1024 bytes to rank 2, expected 2048
 *
 * Tensors against a reference (float or float64), the steps of a training run against the
 * reference's, return codes on every rank, and traffic against a model (per kind, per
 * peer), plus the runner's own model check (apply_model). Every check reduces over the
 * ranks, so every referee must make the same checks in the same order; each returns what
 * it decided the same way on every rank, and a caller branches on that, never on its own
 * rank's verdict. Above verdict.c (verdicts, fields, reductions): the labs and main.c
 * call it, nothing below does. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "referee.h"

/* ================================================================================== */
/* Tensors against a reference                                                        */
/* ================================================================================== */

/* How far a [rows x cols] result (leading dimension ld) is from a dense reference, float
 * (wf) or float64 (wd). */
typedef struct {
    double rel;      /* ||got - want|| / ||want|| (||got - want|| when want is all zeros);
                        infinite at a non-finite element of got                          */
    double differ;   /* elements whose bits differ from wf's                              */
    size_t at;       /* the element named: the first non-finite, else the largest
                        |got - want| (exact: the first that differs)                       */
    double got, want;
} gap;

static gap measure(const float *got, size_t ld, const float *wf, const double *wd, size_t rows, size_t cols,
                   bool exact) {
    gap g = {.at = (size_t)-1};
    double diff2 = 0, ref2 = 0, big = -1;
    bool finite = true;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            float x = got[i * ld + j];
            double w = wf ? (double)wf[i * cols + j] : wd[i * cols + j], d = (double)x - w;
            bool take;
            if (exact) {
                bool same = memcmp(&x, &wf[i * cols + j], sizeof x) == 0;
                g.differ += !same;
                take = !same && g.differ == 1;
            } else {
                diff2 += d * d, ref2 += w * w;
                take = finite && (!isfinite(x) || fabs(d) > big);
                if (!isfinite(x)) finite = false;
                else if (take) big = fabs(d);
            }
            if (take) g.at = i * cols + j, g.got = x, g.want = w;
        }
    g.rel = !finite ? INFINITY : ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    return g;
}

/* " (worst element here [i]: got G, expected W)", [r, c] for a matrix; "" when none. */
static void name_element(char *out, size_t len, const char *which, const gap *g, size_t rows, size_t cols) {
    out[0] = '\0';
    if (g->at == (size_t)-1) return;
    if (rows > 1)
        snprintf(out, len, " (%s [%zu, %zu]: got %.9g, expected %.9g)", which, g->at / cols, g->at % cols, g->got, g->want);
    else snprintf(out, len, " (%s [%zu]: got %.9g, expected %.9g)", which, g->at, g->got, g->want);
}

/* The worst relative error of the case so far, reported as rel_err with the tolerance. */
static void note_error(drv_case *c, double rel, double tol) {
    const cJSON *old = cJSON_GetObjectItemCaseSensitive(c->fields, "rel_err");
    if (!cJSON_IsNumber(old) || rel > old->valuedouble || !isfinite(rel)) drv_num(c, "rel_err", isfinite(rel) ? rel : 1e30);
    drv_num(c, "tolerance", tol);
}

/* The worst error over the ranks against the tolerance; every rank fails alike, each naming
 * its own worst element (`where`). */
static double judge(drv_case *c, const char *what, double rel_err, double tolerance, const char *where) {
    double worst = drv_max(isfinite(rel_err) ? rel_err : 1e30);
    note_error(c, worst, tolerance);
    if (worst >= 1e30) drv_fail(c, "%s: NaN or infinity (never written?)%s", what, where);
    else if (!(worst <= tolerance))
        drv_fail(c, "%s: relative error %.3g > tolerance %.2g%s", what, worst, tolerance, where);
    return worst;
}

double drv_check_error(drv_case *c, const char *what, double rel_err, double tolerance) {
    return judge(c, what, rel_err, tolerance, "");
}

double drv_check_strided(drv_case *c, const char *what, const float *got, size_t ld, const float *expected,
                         size_t rows, size_t cols, bool exact) {
    gap g = measure(got, ld, expected, NULL, rows, cols, exact);
    char where[160];
    name_element(where, sizeof where, exact ? "first here" : "worst element here", &g, rows, cols);
    if (!exact) return judge(c, what, g.rel, drv_tolerance(), where);
    double total = drv_sum(g.differ);
    if (total > 0)
        drv_fail(c, "%s: %.0f element(s) differ from the expected bits%s", what, total, where);
    return total;
}

double drv_check_pad(drv_case *c, const char *what, const float *got, size_t ld, size_t rows, size_t cols) {
    static const unsigned char poison[4] = {0xAD, 0xDE, 0xC0, 0x7F}; /* 0x7FC0DEAD, as drv_poison_host writes it */
    double bad = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = cols; j < ld; j++) bad += memcmp(&got[i * ld + j], poison, sizeof poison) != 0;
    double total = drv_sum(bad);
    if (total > 0)
        drv_fail(c, "%s: the call wrote %.0f element(s) between its %zu columns and its leading dimension %zu (a strided "
                    "view: write only its [rows x cols])", what, total, cols, ld);
    return total;
}

double drv_check_floats(drv_case *c, const char *what, const float *got, const float *expected, size_t n,
                        bool exact) {
    return drv_check_strided(c, what, got, n, expected, n ? 1 : 0, n, exact);
}

double drv_check_tensor(drv_case *c, const char *what, const float *got, const double *want, size_t n,
                        double tolerance) {
    gap g = measure(got, n, NULL, want, n ? 1 : 0, n, false);
    char where[160];
    name_element(where, sizeof where, "worst element here", &g, 1, n);
    return judge(c, what, g.rel, tolerance, where);
}

double drv_rel_err(const float *got, const double *want, size_t n) {
    return measure(got, n, NULL, want, n ? 1 : 0, n, false).rel;
}

double drv_rel_err_f(const float *got, const float *want, size_t n) {
    return measure(got, n, want, NULL, n ? 1 : 0, n, false).rel;
}

/* ================================================================================== */
/* Training steps against the reference's                                              */
/* ================================================================================== */

double drv_check_steps(drv_case *c, const char *what, const double *got, const double *want, int steps, int first,
                       double tol_first, double tol_later) {
    double worst = 0;
    for (int band = 0; band < 2 && band < steps; band++) { /* step 1, then the later ones */
        double e_max = 0;
        int at = band;
        for (int s = band; s < (band ? steps : 1); s++) {
            double e = isfinite(got[s]) ? fabs(got[s] - want[s]) / fabs(want[s]) : INFINITY;
            if (!(e <= e_max)) e_max = e, at = s;
        }
        char w[240];
        snprintf(w, sizeof w, "%s, step %d: %.6g vs the reference's %.6g", what, first + at, got[at], want[at]);
        double e = judge(c, w, e_max, band ? tol_later : tol_first, "");
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* ================================================================================== */
/* AdamW at the rounding level                                                        */
/* ================================================================================== */

double drv_adam_firm(double vhat_sum, double count) { return 1e-3 * sqrt(vhat_sum / (count > 0 ? count : 1)); }

double drv_adam_reach(double lr, int steps) { return 4.0 * lr * steps; }

bool drv_check_adam_reach(drv_case *c, const char *what, double far, double lr, int steps) {
    far = drv_sum(far);
    if (far > 0)
        drv_fail(c, "%s: %.0f element(s) whose gradient is at the rounding level moved farther than AdamW can move "
                    "one in %d step(s) (%.2g)", what, far, steps, drv_adam_reach(lr, steps));
    return far == 0;
}

/* ================================================================================== */
/* Return codes                                                                       */
/* ================================================================================== */

bool drv_check_code(drv_case *c, int rc, int want, const char *what, const char *(*name)(int)) {
    double bad = drv_max(rc != want);
    char got_name[96] = "", want_name[96] = "";
    if (name) snprintf(got_name, sizeof got_name, " (%s)", name(rc)), snprintf(want_name, sizeof want_name, " (%s)", name(want));
    if (rc != want && want == 0) drv_fail(c, "%s returned %d%s", what, rc, name ? got_name : " (error)");
    else if (rc != want) drv_fail(c, "%s returned %d%s, expected %d%s", what, rc, got_name, want, want_name);
    else if (bad > 0) drv_fail(c, "%s failed on another rank", what);
    return bad == 0;
}

bool drv_all_ok(drv_case *c, int rc, const char *what, const char *(*name)(int)) {
    return drv_check_code(c, rc, 0, what, name);
}

bool drv_check_all(drv_case *c, bool ok, const char *fmt, ...) {
    bool all = drv_min(ok) > 0;
    if (!all) {
        char msg[sizeof c->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        drv_fail(c, "%s", msg);
    }
    return all;
}

/* ================================================================================== */
/* Traffic against a model                                                            */
/* ================================================================================== */

static bool off(double got, double want) { return !(fabs(got - want) <= 0.5); } /* a NaN is off */

bool drv_check_count(drv_case *c, const char *what, double got, double want) {
    bool bad = off(got, want);
    if (bad) drv_fail(c, "%s: %.0f, expected %.0f", what, got, want);
    return drv_max(bad) == 0;
}

bool drv_check_peers(drv_case *c, const char *what, const double *got, const double *want) {
    int bad = -1;
    for (int q = 0; q < c->world && bad < 0; q++)
        if (q != c->rank && off(got[q], want[q])) bad = q;
    if (bad >= 0) drv_fail(c, "%s: %.0f bytes to rank %d, expected %.0f", what, got[bad], bad, want[bad]);
    return drv_max(bad >= 0) == 0;
}

/* "3 all-reduce, 1 all-gather (S = 1024 bytes), 2 message(s) of 512 bytes in all" */
static void describe(const drv_traffic *x, char *out, size_t len) {
    int w = 0;
    out[0] = '\0';
    for (int k = 0; k < PL_OP_COUNT && w < (int)len; k++)
        if (x->calls[k] != 0) /* a NaN (never written) shows too */
            w += snprintf(out + w, len - (size_t)w, "%s%.0f %s", w ? ", " : "", x->calls[k], pl_op_kind_name((pl_op_kind)k));
    if (w && w < (int)len) w += snprintf(out + w, len - (size_t)w, " (S = %.0f bytes)", x->bytes);
    if (x->msgs != 0 && w < (int)len)
        w += snprintf(out + w, len - (size_t)w, "%s%.0f message(s) of %.0f bytes in all", w ? ", " : "", x->msgs,
                      x->msg_bytes);
    if (!w) snprintf(out, len, "nothing");
}

bool drv_traffic_differs(const drv_traffic *got, const drv_traffic *want) {
    bool bad = off(got->bytes, want->bytes) || off(got->msgs, want->msgs) || off(got->msg_bytes, want->msg_bytes);
    for (int k = 0; k < PL_OP_COUNT; k++) bad |= off(got->calls[k], want->calls[k]);
    return bad;
}

bool drv_check_traffic(drv_case *c, const char *what, const drv_traffic *got, const drv_traffic *want) {
    bool bad = drv_traffic_differs(got, want);
    if (bad) {
        char a[200], b[200];
        describe(got, a, sizeof a);
        describe(want, b, sizeof b);
        drv_fail(c, "%s: %s, expected %s", what, a, b);
    }
    return drv_max(bad) == 0;
}

drv_traffic drv_traffic_of(const pl_metrics *m) {
    drv_traffic t = {.bytes = (double)m->coll_bytes, .msgs = (double)m->msgs_sent, .msg_bytes = (double)m->bytes_sent};
    for (int k = 0; k < PL_OP_COUNT; k++) t.calls[k] = (double)m->coll_calls[k];
    return t;
}

bool drv_check_counted(drv_case *c, bool differs, const char *backend) {
    bool bad = drv_max(differs) > 0;
    if (bad) drv_forbid(c, "the counted traffic differs from what went to %s (instrumentation tampered with?)", backend);
    return !bad;
}

/* Every branch is decided on values reduced over the ranks, so all referees take it
 * together. The counters come from the player's memory (docs/grader.md says which rubric
 * items rest on them). */
void apply_model(drv_case *c, const drv_model *md) {
    const pl_metrics *m = &c->m;
    int n = c->world;
    bool failed = drv_max(c->verdict != DRV_PASS) > 0; /* a wrong result explains itself best */
    drv_check_counted(c, m->bytes_sent != c->wire.p2p_bytes_sent || m->msgs_sent != c->wire.p2p_msgs_sent ||
                             m->coll_total != c->wire.coll_calls || m->coll_bytes != c->wire.coll_bytes,
                      "the comm backend");
    double colls = drv_sum((double)m->coll_total);
    drv_num(c, "lib_calls", colls);
    if (drv_max(md->no_collectives) > 0 && colls > 0) {
        int which = -1;
        for (int k = 0; k < PL_OP_COUNT && which < 0; k++)
            if (drv_sum((double)m->coll_calls[k]) > 0) which = k;
        drv_forbid(c, "called the library collective pl_%s %.0f time(s): %s",
                   which >= 0 ? pl_op_kind_name((pl_op_kind)which) : "?", colls,
                   md->instead ? md->instead : "use pl_send/pl_recv only");
    }
    double msgs = drv_max((double)m->msgs_sent);
    if (drv_max(md->no_p2p) > 0 && msgs > 0)
        drv_fail(c, "used point-to-point sends (%.0f); %s", msgs, md->instead ? md->instead : "use the library collectives");
    if (drv_max(md->exact_collectives) > 0) {
        drv_traffic got = drv_traffic_of(m), want = {.bytes = md->coll_bytes};
        got.msgs = got.msg_bytes = 0; /* the collectives only */
        for (int k = 0; k < PL_OP_COUNT; k++) want.calls[k] = md->colls[k];
        drv_check_traffic(c, "collectives", &got, &want);
    }
    if (drv_max(md->gemm_flops) > 0) {
        double err = drv_max(fabs(m->gemm_flops - md->gemm_flops)), most = drv_max(m->gemm_flops);
        drv_num(c, "gemm_flops_per_rank", most);
        if (err > 0.5) drv_fail(c, "%.0f GEMM flops on the busiest rank, expected %.0f", most, md->gemm_flops);
    }
    if (drv_max(md->exact_p2p) > 0) {
        drv_traffic got = {.msgs = (double)m->msgs_sent, .msg_bytes = (double)m->bytes_sent};
        drv_traffic want = {.msgs = md->p2p_msgs, .msg_bytes = md->p2p_bytes};
        drv_check_traffic(c, "point-to-point on this rank", &got, &want);
    }
    if (drv_max(md->bytes_optimal) > 0) {
        bool avg = md->bytes_agg == DRV_BYTES_AVG;
        double opt = avg ? drv_sum(md->bytes_optimal) / n : drv_max(md->bytes_optimal);
        double meas = avg ? drv_sum((double)m->bytes_sent) / n : drv_max((double)m->bytes_sent);
        drv_num(c, "bytes_per_rank", meas);
        drv_num(c, "bytes_optimal", opt);
        drv_num(c, "bytes_ratio", meas > 0 ? opt / meas : 0);
        /* Data that must cross ranks cannot have been computed without sending it. */
        if (meas <= 0 && !failed)
            drv_fail(c, "no bytes were sent, but %.0f per rank must move: the result cannot be right", opt);
        else if (meas > 0 && opt / meas > 1.0001 && !failed)
            drv_fail(c, "%.0f bytes per rank sent, fewer than any correct algorithm needs (%.0f)", meas, opt);
    }
    if (drv_max(md->msgs_optimal) > 0) {
        double opt = drv_max(md->msgs_optimal);
        drv_num(c, "msgs_per_rank", msgs);
        drv_num(c, "msgs_optimal", opt);
        drv_num(c, "msgs_ratio", msgs > 0 ? opt / msgs : 0);
        if (msgs <= 0 && !failed) drv_fail(c, "no messages were sent, but %.0f per rank are needed", opt);
    }
}
