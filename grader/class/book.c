/* book.c - the class at a glance, from each student's grade.json and cases.json:
 *
 *   gradebook.csv  one row per submission, sorted by folder: student, folder, status,
 *                  score, max_score, every rubric item, failure classes, reason, notes,
 *                  wall_s. Everything but wall_s (the last column) is a function of the
 *                  submissions and the grader, so two runs give the same file but for it;
 *   summary.md     counts per status, the score histogram, each item's pass rate, the most
 *                  frequent failure classes, the cases most often failed (what to explain
 *                  next lecture), the submissions not graded, and the similar pairs;
 *   summary.png    the same four tables as bars (gnuplot), when gnuplot is installed.
 *
 * Also the Gradescope results.json of one submission that pl-grade did not score (missing
 * file, refused, timed out): every item at 0 with the reason, hidden items withheld. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "class.h"

#define HISTOGRAM_BINS 10
#define TOP_CASES 15

typedef struct {
    char *name;
    int count, students;
} tally;

typedef struct {
    tally *v;
    int n;
} tallies;

static tally *tally_get(tallies *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].name, name)) return &t->v[i];
    t->v = xrealloc(t->v, (size_t)(t->n + 1) * sizeof *t->v);
    t->v[t->n] = (tally){.name = xstrdup(name)};
    return &t->v[t->n++];
}

/* Most students first, then by name: the same order on every run. */
static int by_students(const void *a, const void *b)
{
    const tally *x = a, *y = b;
    if (x->students != y->students) return y->students - x->students;
    if (x->count != y->count) return y->count - x->count;
    return strcmp(x->name, y->name);
}

static void tallies_free(tallies *t)
{
    for (int i = 0; i < t->n; i++) free(t->v[i].name);
    free(t->v);
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double num_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static char *fmt_num(double v)
{
    return xasprintf("%g", round(v * 100) / 100);
}

/* ---------------------------------------------------------------- gradescope */

bool write_gradescope_result(const class_run *cr, const submission *s, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "score", 0);
    char *out = xasprintf("%s: %s%s%s", status_name(s->status), s->why ? s->why : "", s->notes ? "\n" : "",
                          s->notes ? s->notes : "");
    cJSON_AddStringToObject(root, "output", out);
    cJSON *tests = cJSON_AddArrayToObject(root, "tests");
    for (int i = 0; i < cr->n_items; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", cr->items[i].name);
        cJSON_AddNumberToObject(t, "score", 0);
        cJSON_AddNumberToObject(t, "max_score", cr->items[i].points);
        cJSON_AddStringToObject(t, "status", "failed");
        cJSON_AddStringToObject(t, "output", out);
        if (cr->items[i].hidden) cJSON_AddStringToObject(t, "visibility", "after_published");
        cJSON_AddItemToArray(tests, t);
    }
    free(out);
    char *json = cJSON_Print(root);
    char *line = xasprintf("%s\n", json);
    bool ok = write_text_file(path, line);
    free(line);
    free(json);
    cJSON_Delete(root);
    return ok;
}

/* ---------------------------------------------------------------- the plot */

static bool have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* gnuplot: four panels from the data files written beside the script. */
static bool plot(const class_run *cr, const char *dir, int n_rows)
{
    char *script = xasprintf("%s/summary.gp", dir);
    char *png = xasprintf("%s/summary.png", cr->out);
    text t = {0};
    text_printf(&t,
                "set terminal pngcairo size 1400,1000 noenhanced font ',10'\n"
                "set output '%s'\n"
                "set multiplot layout 2,2 title 'lab %s: %d submissions'\n"
                "set style fill solid 0.8 border -1\n"
                "set boxwidth 0.8\n"
                "set grid ytics\n"
                "set rmargin 10\n"
                "set yrange [0:*]\n"
                "set title 'score histogram (%% of %g points)'\n"
                "set xtics rotate by -45\n"
                "plot '%s/histogram.dat' using 2:xtic(1) with boxes notitle lc rgb '#4477aa'\n"
                "set title 'rubric items: students with full points (%%)'\n"
                "set yrange [0:100]\n"
                "plot '%s/items.dat' using 2:xtic(1) with boxes notitle lc rgb '#228833'\n"
                "set yrange [0:*]\n"
                "set title 'failure classes: students with at least one'\n"
                "plot '%s/classes.dat' using 2:xtic(1) with boxes notitle lc rgb '#ee6677'\n"
                "set title 'cases most often failed: students'\n"
                "plot '%s/cases.dat' using 2:xtic(1) with boxes notitle lc rgb '#aa3377'\n"
                "unset multiplot\n",
                png, cr->lab, n_rows, cr->max_score, dir, dir, dir, dir);
    bool ok = write_text_file(script, t.s);
    text_free(&t);
    if (ok) {
        char *cmd = xasprintf("gnuplot '%s' 2>'%s/gnuplot.log'", script, dir);
        int rc = system(cmd);
        ok = rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
        free(cmd);
    }
    free(script);
    free(png);
    return ok;
}

/* A data file of label/value lines; an empty table still plots (one zero bar). */
static void write_dat(const char *path, const text *t)
{
    write_text_file(path, t->len ? t->s : "\"none\" 0\n");
}

/* ---------------------------------------------------------------- the book */

int write_book(const class_run *cr)
{
    text csv = {0};
    const char *head[] = {"student", "folder", "status", "score", "max_score"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) csv_field(&csv, head[i], false);
    for (int i = 0; i < cr->n_items; i++) csv_field(&csv, cr->items[i].name, false);
    csv_field(&csv, "failures", false);
    csv_field(&csv, "reason", false);
    csv_field(&csv, "notes", false);
    csv_field(&csv, "wall_s", true);

    int by_status[ST_GRADER_ERROR + 1] = {0};
    int hist[HISTOGRAM_BINS] = {0};
    int *full = xmalloc((size_t)(cr->n_items + 1) * sizeof *full);
    memset(full, 0, (size_t)(cr->n_items + 1) * sizeof *full);
    tallies classes = {0}, cases = {0};
    text not_graded = {0};
    double *scores = xmalloc((size_t)(cr->n_subs + 1) * sizeof *scores);
    int n_graded = 0;

    for (int i = 0; i < cr->n_subs; i++) {
        const submission *s = &cr->subs[i];
        char *dir = student_dir(cr, s);
        char *path = xasprintf("%s/grade.json", dir);
        cJSON *g = read_json(path);
        free(path);
        const char *status = g ? str_of(g, "status") : "grader error";
        sub_status st = ST_GRADER_ERROR;
        for (int k = ST_GRADED; k <= ST_GRADER_ERROR; k++)
            if (!strcmp(status, status_name((sub_status)k))) st = (sub_status)k;
        by_status[st]++;
        double score = num_of(g, "score");
        scores[i] = score;
        int bin = cr->max_score > 0 ? (int)floor(score / cr->max_score * HISTOGRAM_BINS) : 0;
        hist[bin < 0 ? 0 : bin >= HISTOGRAM_BINS ? HISTOGRAM_BINS - 1 : bin]++;

        char *folder = display_name(s->folder), *sc = fmt_num(score), *mx = fmt_num(cr->max_score);
        csv_field(&csv, s->student, false);
        csv_field(&csv, folder, false);
        csv_field(&csv, status, false);
        csv_field(&csv, sc, false);
        csv_field(&csv, mx, false);
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(g, "items");
        for (int k = 0; k < cr->n_items; k++) {
            double v = num_of(items, cr->items[k].name);
            char *vs = fmt_num(v);
            csv_field(&csv, vs, false);
            free(vs);
            if (st == ST_GRADED && fabs(v - cr->items[k].points) < 0.005) full[k]++;
        }
        text fails = {0};
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(g, "failures")) {
            if (!cJSON_IsNumber(f)) continue;
            text_printf(&fails, "%s%s:%d", fails.len ? " " : "", f->string, (int)f->valuedouble);
            tally *t = tally_get(&classes, f->string);
            t->count += (int)f->valuedouble;
            t->students++;
        }
        csv_field(&csv, fails.s ? fails.s : "", false);
        csv_field(&csv, str_of(g, "why"), false);
        csv_field(&csv, str_of(g, "notes"), false);
        char *wall = xasprintf("%.1f", num_of(g, "wall_s"));
        csv_field(&csv, wall, true);
        free(wall);
        text_free(&fails);
        if (st == ST_GRADED) n_graded++;
        else {
            text_add(&not_graded, "| ", 2);
            md_cell(&not_graded, s->student);
            text_printf(&not_graded, " | %s | ", status);
            md_cell(&not_graded, str_of(g, "why"));
            text_add(&not_graded, " |\n", 3);
        }

        // the cases each student failed, hidden ones included (this summary is the instructor's)
        path = xasprintf("%s/cases.json", dir);
        cJSON *cs = st == ST_GRADED ? read_json(path) : NULL;
        free(path);
        const cJSON *c;
        cJSON_ArrayForEach(c, cs) {
            const char *cl = str_of(c, "classification");
            if (!strcmp(cl, "pass") || !cl[0]) continue;
            tally *t = tally_get(&cases, str_of(c, "id"));
            t->count++;
            t->students++;
        }
        cJSON_Delete(cs);
        cJSON_Delete(g);
        free(folder);
        free(sc);
        free(mx);
        free(dir);
    }
    char *book = xasprintf("%s/gradebook.csv", cr->out);
    if (!write_text_file(book, csv.s)) die("cannot write %s", book);
    free(book);

    /* ---- summary.md */
    text md = {0};
    text_printf(&md, "# Lab %s: the class at a glance\n\n", cr->lab);
    text_printf(&md, "%d submission(s):", cr->n_subs);
    for (int k = ST_GRADED; k <= ST_GRADER_ERROR; k++)
        if (by_status[k] || k <= ST_REFUSED) text_printf(&md, "%s %d %s", k == ST_GRADED ? "" : ",", by_status[k], status_name((sub_status)k));
    text_printf(&md, ". Every score is out of %g.\n\n", cr->max_score);
    if (cr->n_subs) {
        double sum = 0, lo = scores[0], hi = scores[0];
        for (int i = 0; i < cr->n_subs; i++) {
            sum += scores[i];
            lo = scores[i] < lo ? scores[i] : lo;
            hi = scores[i] > hi ? scores[i] : hi;
        }
        char *mean = fmt_num(sum / cr->n_subs), *l = fmt_num(lo), *h = fmt_num(hi);
        text_printf(&md, "Scores (every submission, 0 where not graded): mean %s, lowest %s, highest %s.\n\n", mean, l, h);
        free(mean), free(l), free(h);
    }
    text dat = {0};
    text_printf(&md, "## Score histogram\n\n| score (%% of max) | submissions |\n|---|---|\n");
    for (int b = 0; b < HISTOGRAM_BINS; b++) {
        text_printf(&md, "| %d-%d%s | %d |\n", b * 100 / HISTOGRAM_BINS, (b + 1) * 100 / HISTOGRAM_BINS,
                    b == HISTOGRAM_BINS - 1 ? "" : " (excl.)", hist[b]);
        text_printf(&dat, "\"%d-%d\" %d\n", b * 100 / HISTOGRAM_BINS, (b + 1) * 100 / HISTOGRAM_BINS, hist[b]);
    }
    char *plotdir = xasprintf("%s/plot", cr->out);
    make_dirs(plotdir, 0755);
    char *p = xasprintf("%s/histogram.dat", plotdir);
    write_dat(p, &dat);
    free(p);
    text_free(&dat);

    text_printf(&md, "\n## Rubric items: graded submissions with full points\n\n| item | points | full | rate |\n|---|---|---|---|\n");
    for (int k = 0; k < cr->n_items; k++) {
        double rate = n_graded ? 100.0 * full[k] / n_graded : 0;
        char *pts = fmt_num(cr->items[k].points);
        text_printf(&md, "| %s%s | %s | %d/%d | %.0f%% |\n", cr->items[k].name, cr->items[k].hidden ? " (hidden)" : "", pts,
                    full[k], n_graded, rate);
        text_printf(&dat, "\"%s\" %.1f\n", cr->items[k].name, rate);
        free(pts);
    }
    p = xasprintf("%s/items.dat", plotdir);
    write_dat(p, &dat);
    free(p);
    text_free(&dat);

    qsort(classes.v, (size_t)classes.n, sizeof *classes.v, by_students);
    text_printf(&md, "\n## Failure classes\n\n| class | submissions with it | cases |\n|---|---|---|\n");
    for (int k = 0; k < classes.n; k++) {
        text_printf(&md, "| %s | %d | %d |\n", classes.v[k].name, classes.v[k].students, classes.v[k].count);
        text_printf(&dat, "\"%s\" %d\n", classes.v[k].name, classes.v[k].students);
    }
    if (!classes.n) text_printf(&md, "| (none) | 0 | 0 |\n");
    p = xasprintf("%s/classes.dat", plotdir);
    write_dat(p, &dat);
    free(p);
    text_free(&dat);

    qsort(cases.v, (size_t)cases.n, sizeof *cases.v, by_students);
    text_printf(&md, "\n## Cases most often failed (graded submissions)\n\n| case | submissions that failed it |\n|---|---|\n");
    for (int k = 0; k < cases.n && k < TOP_CASES; k++) {
        text_printf(&md, "| %s | %d |\n", cases.v[k].name, cases.v[k].students);
        if (k < 10) text_printf(&dat, "\"%s\" %d\n", cases.v[k].name, cases.v[k].students);
    }
    if (!cases.n) text_printf(&md, "| (none) | 0 |\n");
    p = xasprintf("%s/cases.dat", plotdir);
    write_dat(p, &dat);
    free(p);
    text_free(&dat);

    if (not_graded.len) text_printf(&md, "\n## Not graded\n\n| student | status | reason |\n|---|---|---|\n%s", not_graded.s);
    write_similarity(cr, &md);

    if (!have_gnuplot()) text_printf(&md, "\n(gnuplot is not installed: no summary.png)\n");
    else if (!plot(cr, plotdir, cr->n_subs)) text_printf(&md, "\n(gnuplot failed: see plot/gnuplot.log; no summary.png)\n");
    else text_printf(&md, "\n![scores, items, failure classes, cases](summary.png)\n");
    char *summary = xasprintf("%s/summary.md", cr->out);
    if (!write_text_file(summary, md.s)) die("cannot write %s", summary);
    free(summary);

    free(plotdir);
    text_free(&md);
    text_free(&not_graded);
    text_free(&csv);
    tallies_free(&classes);
    tallies_free(&cases);
    free(full);
    free(scores);
    return cr->n_subs;
}
