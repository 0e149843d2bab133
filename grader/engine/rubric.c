/* rubric.c - reads a lab's rubric: one directive per line, words separated by blanks,
 * '#' starts a comment. The format is documented for instructors in docs/grader.md. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // defines: fstat, S_ISREG

#include "engine.h"

#define DEFAULT_TIMEOUT_S 60.0
#define DEFAULT_RUN_TIMEOUT_S 1800.0
#define DEFAULT_BUILD_TIMEOUT_S 600.0
#define DEFAULT_MEMORY_LIMIT (8.0 * 1024 * 1024 * 1024)  // per process; Open MPI and OpenBLAS start well below
#define MEMORY_LIMIT_MIN (64.0 * 1024 * 1024)

/* Where a directive came from, for error messages. */
typedef struct {
    const char *path;
    int line;
} origin;

static void __attribute__((noreturn, format(printf, 2, 3))) fail(origin at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die_usage("%s:%d: %s", at.path, at.line, msg);
}

static double positive_seconds(origin at, const char *key, const char *word, bool zero_ok)
{
    double v;
    if (!parse_number(word, &v) || v < 0 || (!zero_ok && v == 0))
        fail(at, "%s wants a %s number of seconds, not '%s'", key, zero_ok ? "non-negative" : "positive",
             word);
    return v;
}

static int world_size(origin at, const char *word)
{
    double v;
    if (!parse_number(word, &v) || v < 1 || v > WORLD_SIZE_MAX || v != (int)v)
        fail(at, "'%s' is not a world size (an integer from 1 to %d)", word, WORLD_SIZE_MAX);
    return (int)v;
}

/* Points: finite (parse_number refuses inf and nan), not negative, at most POINTS_ITEM_MAX,
 * so that no sum of them can overflow into a negative score. */
static double points(origin at, const char *kind, const char *name, const char *word)
{
    double v;
    if (!parse_number(word, &v) || v < 0 || v > POINTS_ITEM_MAX)
        fail(at, "%s %s: points must be a number from 0 to %g, not '%s'", kind, name, POINTS_ITEM_MAX, word);
    return v;
}

static void add_item(rubric *r, rubric_item item)
{
    r->items = xrealloc(r->items, (size_t)(r->n_items + 1) * sizeof *r->items);
    r->items[r->n_items++] = item;
}

/* group NAME POINTS GLOB [GLOB...] */
static void parse_group(rubric *r, origin at, strlist *w, bool hidden)
{
    if (w->count < 4) fail(at, "usage: group NAME POINTS GLOB [GLOB...]");
    rubric_item item = {.kind = ITEM_GROUP, .name = xstrdup(w->items[1]), .hidden = hidden};
    item.points = points(at, "group", w->items[1], w->items[2]);
    for (int i = 3; i < w->count; i++) strlist_push(&item.globs, w->items[i]);
    add_item(r, item);
}

/* perf NAME POINTS parent GROUP metric KEYWORD [target T] [min-bytes B] [cases GLOB]... */
static void parse_perf(rubric *r, origin at, strlist *w, bool hidden)
{
    if (w->count < 3) fail(at, "usage: perf NAME POINTS parent GROUP metric KEYWORD [...]");
    rubric_item item = {.kind = ITEM_PERF, .name = xstrdup(w->items[1]), .target = 1.0, .hidden = hidden};
    item.points = points(at, "perf", w->items[1], w->items[2]);
    for (int i = 3; i < w->count; i += 2) {
        const char *key = w->items[i];
        if (i + 1 >= w->count) fail(at, "perf %s: '%s' needs a value", item.name, key);
        const char *val = w->items[i + 1];
        if (!strcmp(key, "parent")) {
            free(item.parent);
            item.parent = xstrdup(val);
        } else if (!strcmp(key, "metric")) {
            item.metric = metric_find(val);
            if (!item.metric)
                fail(at, "perf %s: metric must be one of %s, not '%s'", item.name, metric_keywords(), val);
        } else if (!strcmp(key, "target")) {
            if (!parse_number(val, &item.target) || item.target <= 0 || item.target > 1e6)
                fail(at, "perf %s: target must be a positive number, not '%s'", item.name, val);
        } else if (!strcmp(key, "min-bytes")) {
            if (!parse_size(val, &item.min_bytes))
                fail(at, "perf %s: min-bytes must be a size such as 1M, not '%s'", item.name, val);
        } else if (!strcmp(key, "cases")) {
            strlist_push(&item.globs, val);
        } else {
            fail(at, "perf %s: unknown key '%s' (parent, metric, target, min-bytes, cases)", item.name, key);
        }
    }
    if (!item.parent) fail(at, "perf %s: needs 'parent GROUP'", item.name);
    if (!item.metric) fail(at, "perf %s: needs 'metric KEYWORD' (%s)", item.name, metric_keywords());
    if (item.min_bytes > 0 && !item.metric->min_bytes)
        fail(at, "perf %s: min-bytes does not apply to metric %s", item.name, item.metric->keyword);
    add_item(r, item);
}

/* run np=N [label=L] args... */
static void parse_run(rubric *r, origin at, strlist *w, bool hidden)
{
    rubric_run run = {.hidden = hidden};
    int i = 1;
    for (; i < w->count; i++) {
        if (!strncmp(w->items[i], "np=", 3)) run.np = world_size(at, w->items[i] + 3);
        else if (!strncmp(w->items[i], "label=", 6) && w->items[i][6]) run.label = xstrdup(w->items[i] + 6);
        else break;
    }
    if (!run.np) fail(at, "usage: run np=N [label=NAME] driver-args...");
    for (; i < w->count; i++) strlist_push(&run.args, w->items[i]);
    if (!run.label) run.label = xasprintf("run%d", r->n_runs + 1);
    if (!valid_name(run.label))
        fail(at, "label=%s: a label is 1 to %d of [A-Za-z0-9._:+=,@-]", run.label, NAME_MAX_BYTES);
    for (int k = 0; k < r->n_runs; k++)
        if (!strcmp(r->runs[k].label, run.label))
            fail(at, "two run lines share the label '%s'; give each its own label=", run.label);
    r->runs = xrealloc(r->runs, (size_t)(r->n_runs + 1) * sizeof *r->runs);
    r->runs[r->n_runs++] = run;
}

/* section ITEM TEXT...: the handout section an item tests, named beside its first failure.
 * The text is the rest of the line (its words joined by one blank): a title needs blanks. */
static void parse_section(rubric *r, origin at, strlist *w)
{
    if (w->count < 3) fail(at, "usage: section ITEM TEXT (e.g. section broadcast 3. Broadcast and reduce)");
    rubric_item *item = NULL;
    for (int i = 0; i < r->n_items && !item; i++)
        if (!strcmp(r->items[i].name, w->items[1])) item = &r->items[i];
    if (!item) fail(at, "section %s: no group or perf line above names it", w->items[1]);
    if (item->section) fail(at, "section %s given twice", w->items[1]);
    strlist text = {0};
    for (int i = 2; i < w->count; i++) strlist_push(&text, w->items[i]);
    item->section = strlist_join(&text, " ");
    strlist_free(&text);
}

static void parse_line(rubric *r, origin at, strlist *w, bool hidden)
{
    const char *key = w->items[0];
    if (!strcmp(key, "lab")) {
        if (w->count != 2) fail(at, "usage: lab NAME");
        if (r->lab && strcmp(r->lab, w->items[1]))
            fail(at, "this rubric is for lab '%s', not '%s'", w->items[1], r->lab);
        if (!r->lab) r->lab = xstrdup(w->items[1]);
        return;
    }
    if (!strcmp(key, "run")) return parse_run(r, at, w, hidden);
    if (!strcmp(key, "group")) return parse_group(r, at, w, hidden);
    if (!strcmp(key, "perf")) return parse_perf(r, at, w, hidden);
    if (hidden) fail(at, "a hidden rubric may only add lab, run, group and perf lines, not '%s'", key);

    if (!strcmp(key, "timeout") || !strcmp(key, "run-timeout") || !strcmp(key, "build-timeout")) {
        if (w->count != 2) fail(at, "usage: %s SECONDS", key);
        double v = positive_seconds(at, key, w->items[1], false);
        if (v > 7 * 24 * 3600.0) fail(at, "%s: %s s is more than a week", key, w->items[1]);
        if (!strcmp(key, "timeout")) r->timeout_s = v;
        else if (!strcmp(key, "run-timeout")) r->run_timeout_s = v;
        else r->build_timeout_s = v;
    } else if (!strcmp(key, "memory-limit")) {
        if (w->count != 2) fail(at, "usage: memory-limit SIZE (e.g. 8G)");
        if (!parse_size(w->items[1], &r->memory_limit) || r->memory_limit < MEMORY_LIMIT_MIN ||
            r->memory_limit > 1e15)
            fail(at, "memory-limit must be a size of at least 64M, such as 8G, not '%s'", w->items[1]);
    } else if (!strcmp(key, "watchdog")) {
        if (w->count != 2) fail(at, "usage: watchdog SECONDS");
        positive_seconds(at, key, w->items[1], true);
        free(r->watchdog);
        r->watchdog = xstrdup(w->items[1]);
    } else if (!strcmp(key, "np")) {
        if (w->count < 2) fail(at, "usage: np N [N...]");
        if (r->n_np) fail(at, "np given twice");
        r->np = xmalloc((size_t)(w->count - 1) * sizeof *r->np);
        for (int i = 1; i < w->count; i++) r->np[r->n_np++] = world_size(at, w->items[i]);
    } else if (!strcmp(key, "args")) {
        for (int i = 1; i < w->count; i++) strlist_push(&r->args, w->items[i]);
    } else if (!strcmp(key, "handout")) {
        if (w->count != 2) fail(at, "usage: handout PATH (the lab's handout, e.g. labs/01-collectives/README.md)");
        free(r->handout);
        r->handout = xstrdup(w->items[1]);
    } else if (!strcmp(key, "section")) {
        parse_section(r, at, w);
    } else if (!strcmp(key, "test-args")) {
        r->have_test_args = true;
        for (int i = 1; i < w->count; i++) strlist_push(&r->test_args, w->items[i]);
    } else {
        fail(at, "unknown directive '%s'", key);
    }
}

void rubric_load(rubric *r, const char *path, bool hidden)
{
    FILE *f = fopen(path, "r");
    if (!f) die_usage("cannot read rubric %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        die_usage("rubric %s is not a regular file", path);  // a directory would read as empty
    if (!r->timeout_s) r->timeout_s = DEFAULT_TIMEOUT_S;
    if (!r->run_timeout_s) r->run_timeout_s = DEFAULT_RUN_TIMEOUT_S;
    if (!r->build_timeout_s) r->build_timeout_s = DEFAULT_BUILD_TIMEOUT_S;
    if (!r->memory_limit) r->memory_limit = DEFAULT_MEMORY_LIMIT;

    char *line = NULL;
    size_t cap = 0;
    origin at = {path, 0};
    while (getline(&line, &cap, f) >= 0) {
        at.line++;
        strlist words = {0};
        strlist_split(&words, line);
        int keep = 0;  // a word starting with '#' begins a comment
        while (keep < words.count && words.items[keep][0] != '#') keep++;
        while (words.count > keep) free(words.items[--words.count]);
        if (words.count) parse_line(r, at, &words, hidden);
        strlist_free(&words);
    }
    free(line);
    fclose(f);
}

const rubric_item *rubric_find(const rubric *r, const char *name)
{
    for (int i = 0; i < r->n_items; i++)
        if (!strcmp(r->items[i].name, name)) return &r->items[i];
    return NULL;
}

void rubric_check(const rubric *r, const char *path)
{
    if (!r->lab) die_usage("%s: no 'lab NAME' line", path);
    if (!r->n_items) die_usage("%s: no group or perf lines, nothing to score", path);
    double total = 0;
    for (int i = 0; i < r->n_items; i++) total += r->items[i].points;
    if (total > POINTS_TOTAL_MAX)
        die_usage("%s: the items add up to %g points, more than %g", path, total, POINTS_TOTAL_MAX);
    for (int i = 0; i < r->n_items; i++) {
        const rubric_item *it = &r->items[i];
        for (int k = 0; k < i; k++)
            if (!strcmp(r->items[k].name, it->name))
                die_usage("%s: two rubric items are named '%s'", path, it->name);
        if (it->kind == ITEM_PERF) {
            const rubric_item *parent = rubric_find(r, it->parent);
            if (!parent || parent->kind != ITEM_GROUP)
                die_usage("%s: perf %s: parent '%s' is not a group", path, it->name, it->parent);
        }
    }
}

double rubric_total_points(const rubric *r)
{
    double total = 0;
    for (int i = 0; i < r->n_items; i++) total += r->items[i].points;
    return round2(total);
}

void rubric_free(rubric *r)
{
    free(r->lab);
    free(r->watchdog);
    free(r->handout);
    free(r->np);
    strlist_free(&r->args);
    strlist_free(&r->test_args);
    for (int i = 0; i < r->n_runs; i++) {
        free(r->runs[i].label);
        strlist_free(&r->runs[i].args);
    }
    free(r->runs);
    for (int i = 0; i < r->n_items; i++) {
        free(r->items[i].name);
        free(r->items[i].parent);
        free(r->items[i].section);
        strlist_free(&r->items[i].globs);
    }
    free(r->items);
    *r = (rubric){0};
}
