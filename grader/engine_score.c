/* engine_score.c - scores the rubric's items from the classified cases.
 *
 * group: all its points when every matching case passed, none otherwise (a collective
 *        that works for some sizes or world sizes only is not done yet).
 * perf:  0 unless every case of the parent group passed (correctness gates performance);
 *        then points * min(1, measured / target), where "measured" is always computed
 *        from what the driver counted or timed in this run:
 *          bytes  worst (smallest) bytes_ratio = optimal / measured bytes per rank
 *          msgs   worst msgs_optimal / msgs_per_rank
 *          speed  median speed_ratio (student time vs library time in the same run)
 *                 over cases with at least min-bytes bytes. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define LISTED_FAILURES_MAX 50  // failed cases listed in results.json per item

typedef struct {
    int matching, passed;
} tally;

static bool item_selects(const strlist *globs, const case_result *c)
{
    for (int i = 0; i < globs->count; i++)
        if (case_matches(c, globs->items[i])) return true;
    return false;
}

static tally count_cases(const strlist *globs, const case_list *cases)
{
    tally t = {0, 0};
    for (int i = 0; i < cases->count; i++) {
        if (!item_selects(globs, &cases->v[i])) continue;
        t.matching++;
        if (cases->v[i].cls == CL_PASS) t.passed++;
    }
    return t;
}

/* The failed cases of a group, one per line, for results.json. */
static char *failure_list(const strlist *globs, const case_list *cases)
{
    size_t cap = 256, len = 0;
    char *s = xmalloc(cap);
    s[0] = '\0';
    int listed = 0, failed = 0;
    for (int i = 0; i < cases->count; i++) {
        const case_result *c = &cases->v[i];
        if (!item_selects(globs, c) || c->cls == CL_PASS) continue;
        failed++;
        if (listed == LISTED_FAILURES_MAX) continue;
        listed++;
        char *line = xasprintf("%s: %s%s%s\n", c->id, class_name(c->cls), c->detail ? ": " : "",
                               c->detail ? c->detail : "");
        for (char *p = line; *p && p[1]; p++)  // keep one line per case
            if (*p == '\n') *p = ' ';
        size_t n = strlen(line);
        while (len + n + 1 > cap) cap *= 2;
        s = xrealloc(s, cap);
        memcpy(s + len, line, n + 1);
        len += n;
        free(line);
    }
    if (failed > listed) {
        char *more = xasprintf("... and %d more\n", failed - listed);
        s = xrealloc(s, len + strlen(more) + 1);
        strcpy(s + len, more);
        free(more);
    }
    return s;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "1M" for 1048576: sizes in the rubric's own notation. */
static char *size_text(double bytes)
{
    const char *units[] = {"", "K", "M", "G"};
    int u = 0;
    while (u < 3 && bytes >= 1024 && bytes == (double)(long long)bytes && (long long)bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    return xasprintf("%g%s", bytes, units[u]);
}

static void score_group(item_score *s, const case_list *cases)
{
    const rubric_item *it = s->item;
    tally t = count_cases(&it->globs, cases);
    if (t.matching == 0) {
        s->why = xstrdup("no cases ran");
        return;
    }
    s->score = t.passed == t.matching ? it->points : 0;
    s->why = xasprintf("%d/%d cases", t.passed, t.matching);
    s->output = failure_list(&it->globs, cases);
}

/* The measured value of one case for a perf metric; false when the case does not report it. */
static bool perf_value(const rubric_item *it, const case_result *c, double *out)
{
    switch (it->metric) {
    case METRIC_BYTES:
        return case_number(c, "bytes_ratio", out);
    case METRIC_MSGS: {
        double optimal, measured;
        if (!case_number(c, "msgs_optimal", &optimal) || !case_number(c, "msgs_per_rank", &measured) ||
            measured <= 0)
            return false;
        *out = optimal / measured;
        return true;
    }
    case METRIC_SPEED: {
        double bytes = 0;
        if (it->min_bytes > 0 && (!case_number(c, "bytes", &bytes) || bytes < it->min_bytes)) return false;
        return case_number(c, "speed_ratio", out);
    }
    }
    return false;
}

static void score_perf(item_score *s, const rubric *r, const case_list *cases)
{
    const rubric_item *it = s->item;
    const rubric_item *parent = rubric_find(r, it->parent);
    tally pt = count_cases(&parent->globs, cases);
    if (pt.matching == 0) {
        s->why = xasprintf("parent %s: no cases ran", parent->name);
        return;
    }
    if (pt.passed < pt.matching) {
        s->why = xasprintf("parent %s failed: %d/%d cases passed", parent->name, pt.passed, pt.matching);
        return;
    }

    const strlist *globs = it->globs.count ? &it->globs : &parent->globs;
    double *values = xmalloc((size_t)cases->count * sizeof *values);
    int n = 0;
    for (int i = 0; i < cases->count; i++)
        if (item_selects(globs, &cases->v[i]) && perf_value(it, &cases->v[i], &values[n])) n++;

    static const char *field[] = {"bytes_ratio", "msgs_optimal and msgs_per_rank", "speed_ratio"};
    if (n == 0) {
        char *size = size_text(it->min_bytes);
        s->why = it->metric == METRIC_SPEED && it->min_bytes > 0
                     ? xasprintf("no cases of at least %s report %s", size, field[it->metric])
                     : xasprintf("no cases report %s", field[it->metric]);
        free(size);
        free(values);
        return;
    }
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    double measured;
    if (it->metric == METRIC_SPEED) {
        measured = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    } else {
        measured = values[0];  // the worst case decides: every case must be efficient
    }
    free(values);
    if (measured < 0) measured = 0;
    double fraction = measured / it->target;
    s->score = it->points * (fraction < 1 ? fraction : 1);

    const char *what = it->metric == METRIC_BYTES ? "bytes" : "msgs";
    if (it->metric == METRIC_SPEED) {
        char *size = size_text(it->min_bytes);
        s->why = xasprintf("speed %.2f of library (median of %d case%s%s%s, target %.2f)", measured, n,
                           n == 1 ? "" : "s", it->min_bytes > 0 ? " >= " : "", it->min_bytes > 0 ? size : "",
                           it->target);
        free(size);
    } else if (measured > 0) {
        s->why = xasprintf("%s %.2fx optimum, ratio %.2f (worst of %d case%s, target %.2f)", what, 1 / measured,
                           measured, n, n == 1 ? "" : "s", it->target);
    } else {
        s->why = xasprintf("%s ratio 0.00 (worst of %d case%s, target %.2f)", what, n, n == 1 ? "" : "s",
                           it->target);
    }
}

void grade_compute(grade *g, const rubric *r, const case_list *cases, const char *build_error)
{
    *g = (grade){0};
    g->items = xmalloc((size_t)r->n_items * sizeof *g->items);
    g->n_items = r->n_items;
    g->build_error = build_error ? xstrdup(build_error) : NULL;
    double total = 0, max = 0;
    for (int i = 0; i < r->n_items; i++) {
        item_score *s = &g->items[i];
        *s = (item_score){.item = &r->items[i]};
        if (build_error) {
            s->why = xstrdup("build error");
            s->output = xasprintf("build error: %s\n", build_error);
        } else if (s->item->kind == ITEM_GROUP) {
            score_group(s, cases);
        } else {
            score_perf(s, r, cases);
        }
        s->score = round2(s->score);
        s->full = s->score == round2(s->item->points);
        if (!s->output) s->output = xstrdup("");
        total += s->score;
        max += s->item->points;
    }
    g->score = round2(total);
    g->max_score = round2(max);
}

void grade_free(grade *g)
{
    for (int i = 0; i < g->n_items; i++) {
        free(g->items[i].why);
        free(g->items[i].output);
    }
    free(g->items);
    free(g->build_error);
    *g = (grade){0};
}
