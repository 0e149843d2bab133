/* verdict.c - the referee's judgement of a case: verdicts and result fields, comparing what
 * the player left in the slots with the referee's own reference, the traffic model against
 * the player's counters, seeds and the tolerance. Everything a verdict rests on is computed
 * here, in the referee's memory, from what the referee made. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "referee.h"

/* ================================================================================== */
/* Verdicts and fields                                                                */
/* ================================================================================== */

static void set_verdict(drv_case *c, drv_verdict v, const char *fmt, va_list ap) {
    if (c->verdict != DRV_PASS && v <= c->verdict) return; /* the first of a kind explains */
    c->verdict = v;
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
}

#define VERDICT_FN(fn, kind)                      \
    void fn(drv_case *c, const char *fmt, ...) {  \
        va_list ap;                               \
        va_start(ap, fmt);                        \
        set_verdict(c, kind, fmt, ap);            \
        va_end(ap);                               \
    }
VERDICT_FN(drv_fail, DRV_WRONG)
VERDICT_FN(drv_error, DRV_ERROR)
VERDICT_FN(drv_forbid, DRV_FORBIDDEN)

void drv_note(drv_case *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->note, sizeof c->note, fmt, ap);
    va_end(ap);
}

bool drv_failed(const drv_case *c) { return c->verdict != DRV_PASS; }

const char *verdict_name(drv_verdict v) {
    static const char *names[] = {"pass", "wrong", "error", "forbidden"};
    return names[v];
}

void drv_num(drv_case *c, const char *key, double value) {
    cJSON *o = c->fields;
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    /* JSON has no NaN or infinity: record them as null rather than invalid JSON. */
    if (!isfinite(value)) cJSON_AddNullToObject(o, key);
    else cJSON_AddNumberToObject(o, key, value);
}

void case_begin(drv_case *c) {
    c->fields = cJSON_CreateObject();
    PL_CHECK(c->fields != NULL, "out of host memory");
}

void case_end(drv_case *c) {
    cJSON_Delete(c->fields);
    c->fields = NULL;
}

/* The case's verdict over all ranks: the strongest kind wins, the lowest rank with it
 * explains. */
void gather_verdict(drv_case *c) {
    typedef struct {
        int32_t verdict;
        char msg[sizeof c->msg];
    } mine_t;
    mine_t mine = {.verdict = c->verdict};
    memcpy(mine.msg, c->msg, sizeof mine.msg);
    mine.msg[sizeof mine.msg - 1] = '\0';
    mine_t *all = malloc((size_t)c->world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(&mine, sizeof mine, all);
    int who = -1;
    for (int r = 0; r < c->world; r++) {
        int32_t v = all[r].verdict;
        if (v < DRV_PASS || v > DRV_FORBIDDEN) v = DRV_ERROR; /* cannot happen: signed */
        if (v != DRV_PASS && (who < 0 || v > all[who].verdict)) who = r;
    }
    if (who < 0) {
        c->verdict = DRV_PASS;
    } else {
        c->verdict = (drv_verdict)all[who].verdict;
        all[who].msg[sizeof all[who].msg - 1] = '\0';
        char text[sizeof c->msg + 32];
        if (who != 0 && c->world > 1) snprintf(text, sizeof text, "rank %d: %s", who, all[who].msg);
        else snprintf(text, sizeof text, "%s", all[who].msg);
        memcpy(c->msg, text, sizeof c->msg - 1); /* cut at the field's size */
        c->msg[sizeof c->msg - 1] = '\0';
    }
    free(all);
}

/* ================================================================================== */
/* Checks                                                                             */
/* ================================================================================== */

double drv_tolerance(void) { return pl_tolerance(); }
const char *drv_tolerance_why(void) { return pl_tolerance_why(); }

double drv_sum(double v) {
    double *all = malloc((size_t)g_ref.world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(&v, sizeof v, all);
    double s = 0;
    for (int r = 0; r < g_ref.world; r++) s += all[r];
    free(all);
    return s;
}

static double fold(double v, bool max) {
    double *all = malloc((size_t)g_ref.world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(&v, sizeof v, all);
    double m = all[0];
    for (int r = 1; r < g_ref.world; r++) m = max ? (all[r] > m ? all[r] : m) : (all[r] < m ? all[r] : m);
    free(all);
    return m;
}
double drv_max(double v) { return fold(v, true); }
double drv_min(double v) { return fold(v, false); }

void drv_allgather_u64(uint64_t v, uint64_t *out) { drv_allgather(&v, sizeof v, out); }

/* The worst relative error of the case so far, reported as rel_err with the tolerance. */
static void note_error(drv_case *c, double rel, double tol) {
    const cJSON *old = cJSON_GetObjectItemCaseSensitive(c->fields, "rel_err");
    if (!cJSON_IsNumber(old) || rel > old->valuedouble || !isfinite(rel)) drv_num(c, "rel_err", isfinite(rel) ? rel : 1e30);
    drv_num(c, "tolerance", tol);
}

bool drv_all_ok(drv_case *c, int rc, const char *what, const char *(*name)(int)) {
    double bad = drv_max(rc != 0);
    if (rc != 0) drv_fail(c, "%s returned %d (%s)", what, rc, name ? name(rc) : "error");
    else if (bad > 0) drv_fail(c, "%s failed on another rank", what);
    return bad == 0;
}

double drv_check_error(drv_case *c, const char *what, double rel_err, double tolerance) {
    double worst = drv_max(isfinite(rel_err) ? rel_err : 1e30);
    note_error(c, worst, tolerance);
    if (worst >= 1e30) drv_fail(c, "%s: NaN or infinity (never written?)", what);
    else if (!(worst <= tolerance))
        drv_fail(c, "%s: relative Frobenius error %.3g > tolerance %.0e", what, worst, tolerance);
    return worst;
}

double drv_check_strided(drv_case *c, const char *what, const float *got, size_t ld, const float *expected,
                         size_t rows, size_t cols, bool exact) {
    double diff2 = 0, ref2 = 0, wrong = 0;
    bool nan_seen = false;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            float g = got[i * ld + j], e = expected[i * cols + j];
            if (isnan(g)) nan_seen = true;
            if (exact) {
                wrong += memcmp(&g, &e, sizeof g) != 0;
            } else {
                double d = (double)g - (double)e;
                diff2 += d * d;
                ref2 += (double)e * e;
            }
        }
    if (exact) {
        double total = drv_sum(wrong);
        if (total > 0)
            drv_fail(c, "%s: %.0f element(s) differ from the expected bits (wrong rows/columns, or transposed?)", what,
                     total);
        return total;
    }
    double rel = nan_seen ? INFINITY : ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    return drv_check_error(c, what, rel, drv_tolerance());
}

double drv_check_floats(drv_case *c, const char *what, const float *got, const float *expected, size_t n,
                        bool exact) {
    return drv_check_strided(c, what, got, n, expected, n ? 1 : 0, n, exact);
}

/* ================================================================================== */
/* The traffic model against the player's counters                                   */
/* ================================================================================== */

/* Every branch is decided on values reduced over the ranks, so all referees take it
 * together. The counters come from the player's memory (docs/grader.md says which rubric
 * items rest on them). */
void apply_model(drv_case *c, const drv_model *md) {
    const pl_metrics *m = &c->m;
    int n = c->world;
    bool failed = drv_max(c->verdict != DRV_PASS) > 0; /* a wrong result explains itself best */
    double mismatch = (double)(m->bytes_sent != c->wire.p2p_bytes_sent || m->msgs_sent != c->wire.p2p_msgs_sent ||
                               m->coll_total != c->wire.coll_calls || m->coll_bytes != c->wire.coll_bytes);
    if (drv_max(mismatch) > 0)
        drv_forbid(c, "the counted traffic differs from what went to the comm backend (instrumentation tampered with?)");
    double colls = drv_sum((double)m->coll_total);
    drv_num(c, "lib_calls", colls);
    if (drv_max(md->no_collectives) > 0 && colls > 0) {
        int which = -1;
        for (int k = 0; k < PL_OP_COUNT && which < 0; k++)
            if (drv_sum((double)m->coll_calls[k]) > 0) which = k;
        drv_forbid(c, "called the library collective pl_%s %.0f time(s): use pl_send/pl_recv only",
                   which >= 0 ? pl_op_kind_name((pl_op_kind)which) : "?", colls);
    }
    double msgs = drv_max((double)m->msgs_sent);
    if (drv_max(md->no_p2p) > 0 && msgs > 0) drv_fail(c, "used point-to-point sends (%.0f); use the library collectives", msgs);
    if (drv_max(md->exact_collectives) > 0) {
        double bad = 0;
        for (int k = 0; k < PL_OP_COUNT; k++) bad += m->coll_calls[k] != (uint64_t)md->colls[k];
        bad += fabs((double)m->coll_bytes - md->coll_bytes) > 0.5;
        if (drv_max(bad) > 0) {
            char got[160] = "", want[160] = "";
            for (int k = 0, gl = 0, wl = 0; k < PL_OP_COUNT; k++) {
                if (m->coll_calls[k] && gl < (int)sizeof got)
                    gl += snprintf(got + gl, sizeof got - (size_t)gl, "%s%llu %s", gl ? ", " : "",
                                   (unsigned long long)m->coll_calls[k], pl_op_kind_name((pl_op_kind)k));
                if (md->colls[k] && wl < (int)sizeof want)
                    wl += snprintf(want + wl, sizeof want - (size_t)wl, "%s%d %s", wl ? ", " : "", md->colls[k],
                                   pl_op_kind_name((pl_op_kind)k));
            }
            drv_fail(c, "collectives: %s (S = %.0f bytes), expected %s (S = %.0f bytes)", got[0] ? got : "none",
                     (double)m->coll_bytes, want[0] ? want : "none", md->coll_bytes);
        }
    }
    if (drv_max(md->gemm_flops) > 0) {
        double err = drv_max(fabs(m->gemm_flops - md->gemm_flops)), most = drv_max(m->gemm_flops);
        drv_num(c, "gemm_flops_per_rank", most);
        if (err > 0.5) drv_fail(c, "%.0f GEMM flops on the busiest rank, expected %.0f", most, md->gemm_flops);
    }
    if (drv_max(md->exact_p2p) > 0) {
        double bad = drv_max((double)(fabs((double)m->bytes_sent - md->p2p_bytes) > 0.5 ||
                                      fabs((double)m->msgs_sent - md->p2p_msgs) > 0.5));
        if (bad > 0)
            drv_fail(c, "point-to-point: sent %.0f bytes in %.0f messages on this rank, expected %.0f in %.0f",
                     (double)m->bytes_sent, (double)m->msgs_sent, md->p2p_bytes, md->p2p_msgs);
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

/* Device memory the student's code allocated and did not free: what the player had in use
 * after release() against before play() (its own accounting), with the allocation sites
 * it names. A rank without a leak passes; gather_verdict names the lowest rank with one. */
void check_leak(drv_case *c, const char *sites) {
    double leaked = (double)(c->mem_after - c->mem_before);
    if (leaked > 0 && sites && sites[0]) /* "leaked N allocations (B bytes): SITES" */
        drv_fail(c, "%s, after the free/teardown calls", sites);
    else if (leaked > 0)
        drv_fail(c, "leaked %.0f bytes of device memory after the free/teardown calls", leaked);
}

/* Red zones of the student's own allocations (pl_malloc in checked mode), as the player's
 * harness found them: a write outside one is a wrong result, named with its site. */
bool check_guards(drv_case *c, const char *when) {
    char guards[sizeof ((wire_report *)0)->guards];
    memcpy(guards, ((const wire_header *)g_ref.region)->report.guards, sizeof guards);
    guards[sizeof guards - 1] = '\0';
    for (char *p = guards; *p; p++)
        if (*p == '\n') *p = ';';
    if (guards[0]) drv_fail(c, "%s: %s", when, guards);
    return guards[0] != '\0';
}

/* ================================================================================== */
/* Seeds                                                                              */
/* ================================================================================== */

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t hand_seed(void) { return pl_info()->seed; }

uint64_t drv_case_seed(const drv_case *c, int r, int run) {
    char text[DRV_NAME_MAX + 48];
    int n = snprintf(text, sizeof text, "seed|%d|%d|%s", r, run, c->name);
    if (g_ref.graded) return siphash_record(g_ref.key, 0x5EEDull, text, (size_t)n);
    uint64_t v = splitmix(hand_seed() * 0x100000001B3ull + (uint64_t)r * 0x10001ull + (uint64_t)run);
    for (const char *p = c->name; *p; p++) v = (v ^ (unsigned char)*p) * 0x100000001B3ull;
    return splitmix(v);
}

bool drv_graded(void) { return g_ref.graded; }

uint64_t drv_unpredictable(void) {
    static uint64_t state;
    uint64_t v = 0;
    if (g_ref.graded && getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v) return v;
    state = splitmix(state + hand_seed());
    return state;
}

double drv_rel_err(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double e = got[i] - want[i];
        num += e * e, den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
