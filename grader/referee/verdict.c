/* verdict.c - the referee's judgement of a case: verdicts and result fields, cross-rank
 * values, leaks and red zones, seeds and the tolerance (the checks that compare results and
 * traffic with a reference: checks.c, above this file). Everything a verdict rests on is
 * computed in the referee's memory, from what the referee made. */
#include <cjson/cJSON.h>
#include <errno.h>
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

void drv_str(drv_case *c, const char *key, const char *text) {
    cJSON_DeleteItemFromObjectCaseSensitive(c->fields, key);
    cJSON_AddStringToObject(c->fields, key, text);
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
/* Cross-rank values, the tolerance, leaks and red zones                              */
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

/* Device memory the student's code allocated and did not free: what the player had in use
 * after release() against before play() (its own accounting), with the allocation sites it
 * names. A leak is not a wrong result: the case keeps its verdict and reports `freed` (1, or
 * 0 on every rank when any rank leaked) and `leak` (the lowest rank's sites), which the
 * rubric's `metric freed` item scores (docs/grader.md), so a forgotten free costs that item's
 * points, not every group whose cases allocate. */
void check_leak(drv_case *c, const char *sites) {
    typedef struct {
        int32_t leaked;
        char text[200];
    } mine_t;
    mine_t mine = {.leaked = c->mem_after > c->mem_before};
    double bytes = (double)(c->mem_after - c->mem_before);
    if (mine.leaked && sites && sites[0]) snprintf(mine.text, sizeof mine.text, "%s", sites);
    else if (mine.leaked) snprintf(mine.text, sizeof mine.text, "leaked %.0f bytes of device memory", bytes);
    mine_t *all = malloc((size_t)c->world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(&mine, sizeof mine, all);
    int who = -1;
    for (int r = 0; r < c->world && who < 0; r++)
        if (all[r].leaked) who = r;
    drv_num(c, "freed", who < 0 ? 1 : 0);
    if (who >= 0) {
        char text[sizeof mine.text + 80];
        all[who].text[sizeof all[who].text - 1] = '\0';
        if (c->world > 1) snprintf(text, sizeof text, "rank %d: %s, after the free/teardown calls", who, all[who].text);
        else snprintf(text, sizeof text, "%s, after the free/teardown calls", all[who].text);
        cJSON_AddStringToObject(c->fields, "leak", text);
        size_t n = strlen(c->note);
        snprintf(c->note + n, sizeof c->note - n, "%s%s", n ? "; " : "", text);
    }
    free(all);
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

/* Graded: SipHash-2-4 of a counter under a key of this referee's own, drawn from the kernel
 * once (the player cannot read this process; a system call per number cost a third of a
 * Lab 1 grading's CPU time in getrandom). By hand: reproducible. */
void ref_random_bytes(void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = getrandom((unsigned char *)buf + got, n - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) pl_fatal(__FILE__, __LINE__, "getrandom", strerror(errno));
        got += (size_t)k;
    }
}

uint64_t drv_unpredictable(void) {
    static uint64_t state, count;
    static unsigned char key[SIPHASH_KEY_BYTES];
    static bool keyed;
    if (g_ref.graded) {
        if (!keyed) ref_random_bytes(key, sizeof key), keyed = true;
        return siphash_record(key, count++, "u", 1);
    }
    state = splitmix(state + hand_seed());
    return state;
}
