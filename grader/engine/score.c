/* score.c - scores the rubric's items from the classified cases.
 *
 * group: all its points when every matching case passed, none otherwise (a collective
 *        that works for some sizes or world sizes only is not done yet).
 * perf:  0 unless every case of the parent group passed (correctness gates performance);
 *        then points * min(1, measured / target), where "measured" comes from the metric
 *        table (metric.c): the worst or the median of a ratio the driver computed
 *        from what the harness counted or timed in this run (1.0 = optimal).
 * The failures of hidden cases never appear in a public item's text: it says only how
 * many there were; the details go to a separate, withheld text. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define LISTED_FAILURES_MAX 50  // failed cases listed in results.json per item

typedef struct {
    int matching, passed;
    int hidden_matching, hidden_passed;  // of those, the cases of hidden runs
} tally;

static bool item_selects(const strlist *globs, const case_result *c)
{
    for (int i = 0; i < globs->count; i++)
        if (case_matches(c, globs->items[i])) return true;
    return false;
}

static tally count_cases(const strlist *globs, const case_list *cases)
{
    tally t = {0, 0, 0, 0};
    for (int i = 0; i < cases->count; i++) {
        if (!item_selects(globs, &cases->v[i])) continue;
        bool pass = cases->v[i].cls == CL_PASS;
        t.matching++;
        t.passed += pass;
        t.hidden_matching += cases->v[i].hidden;
        t.hidden_passed += cases->v[i].hidden && pass;
    }
    return t;
}

/* "10/12 cases": a public item counts only public cases and says how many hidden failed. */
static char *count_text(const rubric_item *it, const char *prefix, const char *suffix, tally t)
{
    if (it->hidden || !t.hidden_matching) return xasprintf("%s%d/%d cases%s", prefix, t.passed, t.matching, suffix);
    int failed = t.hidden_matching - t.hidden_passed;
    char *hidden = failed ? xasprintf(", %d hidden case(s) failed", failed) : xstrdup("");
    char *s = xasprintf("%s%d/%d cases%s%s", prefix, t.passed - t.hidden_passed, t.matching - t.hidden_matching,
                        suffix, hidden);
    free(hidden);
    return s;
}

/* The failed cases of a group (hidden ones, or the others), one per line, for results.json.
 * *failed counts them all, listed or not. */
static char *failure_list(const strlist *globs, const case_list *cases, bool hidden, int *failed_out)
{
    size_t cap = 256, len = 0;
    char *s = xmalloc(cap);
    s[0] = '\0';
    int listed = 0, failed = 0;
    for (int i = 0; i < cases->count; i++) {
        const case_result *c = &cases->v[i];
        if (!item_selects(globs, c) || c->cls == CL_PASS || c->hidden != hidden) continue;
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
    if (failed_out) *failed_out = failed;
    return s;
}

/* The item's output: its public failures, and how many hidden cases failed (a hidden
 * item is withheld as a whole, so it lists them). */
static void failure_texts(item_score *s, const strlist *globs, const case_list *cases)
{
    char *pub = failure_list(globs, cases, false, NULL);
    char *hid = failure_list(globs, cases, true, &s->hidden_failed);
    if (s->item->hidden) {
        s->output = xasprintf("%s%s", pub, hid);
        free(hid);
    } else {
        s->output = s->hidden_failed ? xasprintf("%s%d hidden case(s) failed\n", pub, s->hidden_failed) : xstrdup(pub);
        s->hidden_output = s->hidden_failed ? hid : NULL;
        if (!s->hidden_output) free(hid);
    }
    free(pub);
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
    s->why = count_text(it, "", "", t);
    failure_texts(s, &it->globs, cases);
}

/* A yes/no metric: full points when every case that reports it is 1, else 0, with the
 * cases that were not (the text of their field `field`, or `fallback`) in the item's output.
 * freed: clean of leaks (field `leak`); rule: a rule of the handout kept (field `rule`). */
typedef struct {
    const char *kept;     // why, when every case is 1: "... (N cases)"
    const char *broken;   // why, when not: "... N of M cases, first ID: TEXT"
    const char *field;    // the cases' text field that says why
    const char *fallback; // ... when a case has none
} yes_no_words;

static void score_yes_no(item_score *s, const strlist *globs, const case_list *cases, const perf_metric *m,
                         const double *values, int n, const yes_no_words *w)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += values[i] < 1;
    const char *plural = n == 1 ? "" : "s";
    if (!bad) {
        s->score = s->item->points;
        s->why = xasprintf("%s (%d case%s)", w->kept, n, plural);
        return;
    }
    char *out = xstrdup("");
    double v;
    for (int i = 0, shown = 0; i < cases->count && shown < 3; i++) {
        const case_result *c = &cases->v[i];
        if (c->hidden || !item_selects(globs, c) || !metric_case_value(m, c, 0, &v) || v >= 1) continue;
        const cJSON *text = c->json ? cJSON_GetObjectItemCaseSensitive(c->json, w->field) : NULL;
        const char *what = cJSON_IsString(text) ? text->valuestring : w->fallback;
        if (!shown) s->why = xasprintf("%s %d of %d case%s, first %s: %s", w->broken, bad, n, plural, c->id, what);
        char *next = xasprintf("%s%s: %s\n", out, c->id, what);
        free(out);
        out = next;
        shown++;
    }
    if (!s->why) s->why = xasprintf("%s %d of %d case%s", w->broken, bad, n, plural);
    s->output = out;
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
        char *prefix = xasprintf("parent %s failed: ", parent->name);
        s->why = count_text(it, prefix, " passed", pt);
        free(prefix);
        return;
    }

    const perf_metric *m = it->metric;
    const strlist *globs = it->globs.count ? &it->globs : &parent->globs;
    double *values = xmalloc((size_t)(cases->count ? cases->count : 1) * sizeof *values);
    int n = 0;
    bool referee_counted = true;
    for (int i = 0; i < cases->count; i++)
        if (item_selects(globs, &cases->v[i]) && metric_case_value(m, &cases->v[i], it->min_bytes, &values[n])) {
            double by = 0;
            referee_counted &= case_number(&cases->v[i], "counted_by_referee", &by) && by == 1;
            n++;
        }
    s->players_word = m->players_word && !(m->traffic && n > 0 && referee_counted);

    if (n == 0 && m->phrase == SAY_RULE_KEPT) {  // no case the rule applies to: nothing to judge
        s->score = it->points;
        s->why = xstrdup("no case at these world sizes and sizes that the rule applies to");
        free(values);
        return;
    }
    if (n == 0) {
        char *size = size_text(it->min_bytes), *fields = metric_fields_text(m);
        s->why = m->min_bytes && it->min_bytes > 0 ? xasprintf("no cases of at least %s report %s", size, fields)
                                                   : xasprintf("no cases report %s", fields);
        free(size);
        free(fields);
        free(values);
        return;
    }
    if (m->phrase == SAY_CASES_CLEAN || m->phrase == SAY_RULE_KEPT) {  // each case 1 or 0
        static const yes_no_words clean = {"every allocation freed", "memory left allocated in", "leak", "a leak"};
        static const yes_no_words rule = {"kept in every case it applies to", "broken in", "rule", "the rule not kept"};
        score_yes_no(s, globs, cases, m, values, n, m->phrase == SAY_CASES_CLEAN ? &clean : &rule);
        free(values);
        return;
    }
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    // worst: the smallest ratio decides, every case must be efficient; median: timings are noisy
    double measured = m->aggregate == METRIC_WORST ? values[0]
                      : n % 2                      ? values[n / 2]
                                                   : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    free(values);
    if (measured < 0) measured = 0;
    double fraction = measured / it->target;
    s->score = it->points * (fraction < 1 ? fraction : 1);

    const char *agg = m->aggregate == METRIC_WORST ? "worst" : "median";
    char *size = size_text(it->min_bytes);
    char *over = m->min_bytes && it->min_bytes > 0 ? xasprintf(" >= %s", size) : xstrdup("");
    if (m->phrase == SAY_OF_LIBRARY) {
        s->why = xasprintf("%s %.2f of library (%s of %d case%s%s, target %.2f)", m->keyword, measured, agg, n,
                           n == 1 ? "" : "s", over, it->target);
    } else if (measured > 0) {
        s->why = xasprintf("%s %.2fx optimum, ratio %.2f (%s of %d case%s%s, target %.2f)", m->keyword, 1 / measured,
                           measured, agg, n, n == 1 ? "" : "s", over, it->target);
    } else {
        s->why = xasprintf("%s ratio 0.00 (%s of %d case%s%s, target %.2f)", m->keyword, agg, n, n == 1 ? "" : "s",
                           over, it->target);
    }
    free(size);
    free(over);
}

void grade_compute(grade *g, const rubric *r, const case_list *cases, const case_result *build)
{
    *g = (grade){0};
    g->items = xmalloc((size_t)r->n_items * sizeof *g->items);
    g->n_items = r->n_items;
    g->build = build;
    double total = 0, max = 0;
    for (int i = 0; i < r->n_items; i++) {
        item_score *s = &g->items[i];
        *s = (item_score){.item = &r->items[i]};
        if (build) {
            s->why = xstrdup(build->cls == CL_FORBIDDEN ? "forbidden at build" : "build error");
            s->output = xasprintf("%s: %s\n", class_name(build->cls), build->detail);
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
        free(g->items[i].hidden_output);
    }
    free(g->items);
    *g = (grade){0};
}
