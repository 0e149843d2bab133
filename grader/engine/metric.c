/* metric.c - the performance metrics a rubric's `perf` item can score, as one table.
 *
 * Every metric is a ratio where 1.0 is optimal and less is worse (optimal / measured
 * bytes, the library's time / the student's...), computed by the driver from what the
 * harness counted or timed in the same run. A row says which result fields hold it, how a
 * case's value comes from them, how the cases' values become the item's measured value,
 * how the summary states it, whether `min-bytes` applies, and whether the value rests on what
 * the student's process counted itself (the player's word: results.json says so on the item;
 * speed is the referee's clock). Adding a metric is adding a row (and documenting it in
 * docs/grader.md). */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static const perf_metric METRICS[] = {
    /* keyword   fields                            value            aggregate      phrase            min-bytes players-word traffic */
    {"bytes",   {"bytes_ratio", NULL},             METRIC_FIELD,    METRIC_WORST,  SAY_TIMES_OPTIMUM, false, true,  true},
    {"msgs",    {"msgs_optimal", "msgs_per_rank"}, METRIC_QUOTIENT, METRIC_WORST,  SAY_TIMES_OPTIMUM, false, true,  true},
    {"speed",   {"speed_ratio", NULL},             METRIC_FIELD,    METRIC_MEDIAN, SAY_OF_LIBRARY,    true,  false, false},
    {"bubble",  {"bubble_ratio", NULL},            METRIC_FIELD,    METRIC_WORST,  SAY_TIMES_OPTIMUM, false, true,  false},
    {"memory",  {"memory_ratio", NULL},            METRIC_FIELD,    METRIC_WORST,  SAY_TIMES_OPTIMUM, false, true,  false},
    {"traffic", {"traffic_ratio", NULL},           METRIC_FIELD,    METRIC_WORST,  SAY_TIMES_OPTIMUM, false, true,  true},
    /* 1 where everything the case allocated was freed by its free/teardown calls, 0 where
     * something leaked (the case's `leak` field names it): a leak costs this item only */
    {"freed",   {"freed", NULL},                   METRIC_FIELD,    METRIC_WORST,  SAY_CASES_CLEAN,   false, true,  false},
    /* 1 where the case kept a rule of the handout that outputs and bytes cannot show (Lab 1:
     * the chain pipelined), 0 where not (its `rule` field says why); reported only by the
     * cases where the rule applies: none at the world sizes run is no evidence either way */
    {"rule",    {"rule_kept", NULL},               METRIC_FIELD,    METRIC_WORST,  SAY_RULE_KEPT,     false, true,  true},
};
#define N_METRICS (sizeof METRICS / sizeof METRICS[0])

const perf_metric *metric_find(const char *keyword)
{
    for (size_t i = 0; i < N_METRICS; i++)
        if (!strcmp(METRICS[i].keyword, keyword)) return &METRICS[i];
    return NULL;
}

const char *metric_keywords(void)
{
    static char list[256];
    if (!list[0]) {
        size_t n = 0;
        for (size_t i = 0; i < N_METRICS && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", METRICS[i].keyword);
    }
    return list;
}

bool metric_case_value(const perf_metric *m, const case_result *c, double min_bytes, double *out)
{
    double bytes;
    if (m->min_bytes && min_bytes > 0 && (!case_number(c, "bytes", &bytes) || bytes < min_bytes)) return false;
    double a, b;
    if (!case_number(c, m->fields[0], &a)) return false;
    if (m->value == METRIC_FIELD) {
        *out = a;
        return true;
    }
    if (!case_number(c, m->fields[1], &b) || b <= 0) return false;
    *out = a / b;
    return true;
}

char *metric_fields_text(const perf_metric *m)
{
    return m->fields[1] ? xasprintf("%s and %s", m->fields[0], m->fields[1]) : xstrdup(m->fields[0]);
}
