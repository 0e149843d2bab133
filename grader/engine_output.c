/* engine_output.c - the machine-readable reports under --out DIR:
 *   results.json  Gradescope's autograder format, one test per rubric item;
 *   junit.xml     one testcase per case, for CI dashboards;
 *   cases.json    every case: the driver's result fields plus id, np, run, classification,
 *                 detail (the raw material for an instructor's own analysis). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // defines: mkdir

#include "engine.h"

/* mkdir -p */
static bool make_dirs(const char *dir)
{
    char *path = xstrdup(dir);
    bool ok = true;
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) ok = false;
        *p = saved;
        if (!saved || !ok) break;
    }
    free(path);
    return ok;
}

static bool write_text(const char *dir, const char *file, const char *text)
{
    char *path = xasprintf("%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "pl-grade: cannot write %s: %s\n", path, strerror(errno));
    free(path);
    return ok;
}

static bool write_json(const char *dir, const char *file, cJSON *root)
{
    char *text = cJSON_Print(root);
    if (!text) {
        fputs("pl-grade: out of memory\n", stderr);
        exit(3);
    }
    size_t n = strlen(text);
    text = realloc(text, n + 2);  // end the file with a newline
    if (!text) exit(3);
    strcpy(text + n, "\n");
    bool ok = write_text(dir, file, text);
    free(text);
    return ok;
}

/* ---------------------------------------------------------------- results.json */

static bool write_gradescope(const char *dir, const char *lab, const grade *g, const case_list *cases)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "score", g->score);
    cJSON_AddNumberToObject(root, "max_score", g->max_score);
    char *summary = g->build_error ? xasprintf("lab %s: build error: %s", lab, g->build_error)
                                   : xasprintf("lab %s: %d/%d cases passed", lab, cases->passed, cases->count);
    cJSON_AddStringToObject(root, "output", summary);
    free(summary);
    cJSON *tests = cJSON_AddArrayToObject(root, "tests");
    for (int i = 0; i < g->n_items; i++) {
        const item_score *s = &g->items[i];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", s->item->name);
        cJSON_AddNumberToObject(t, "score", s->score);
        cJSON_AddNumberToObject(t, "max_score", round2(s->item->points));
        cJSON_AddStringToObject(t, "status", s->full ? "passed" : "failed");
        char *out = xasprintf("%s\n%s", s->why, s->output);
        cJSON_AddStringToObject(t, "output", out);
        free(out);
        // hidden items stay out of the student's view until the instructor publishes grades
        if (s->item->hidden) cJSON_AddStringToObject(t, "visibility", "after_published");
        cJSON_AddItemToArray(tests, t);
    }
    bool ok = write_json(dir, "results.json", root);
    cJSON_Delete(root);
    return ok;
}

/* ---------------------------------------------------------------- junit.xml */

static void xml_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\n': fputs("&#10;", f); break;  // keep line breaks inside attributes
        default: fputc(*s, f);  // text was cleaned: no other control bytes remain
        }
    }
}

static bool write_junit(const char *dir, const char *lab, const case_list *cases)
{
    char *path = xasprintf("%s/junit.xml", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "pl-grade: cannot write %s: %s\n", path, strerror(errno));
        free(path);
        return false;
    }
    int failures = cases->count - cases->passed;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites name=\"pl-grade\" tests=\"%d\" failures=\"%d\">\n", cases->count, failures);
    fprintf(f, "  <testsuite name=\"");
    xml_escaped(f, lab);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"0\">\n", cases->count, failures);
    for (int i = 0; i < cases->count; i++) {
        const case_result *c = &cases->v[i];
        double us = 0;
        fprintf(f, "    <testcase classname=\"");
        xml_escaped(f, lab);
        if (c->np) fprintf(f, ".np%d", c->np);
        if (c->run_label) fprintf(f, ".%s", c->run_label);
        fprintf(f, "\" name=\"");
        xml_escaped(f, c->name);
        fprintf(f, "\" time=\"%.6f\"", case_number(c, "time_us", &us) ? us * 1e-6 : 0.0);
        if (c->cls == CL_PASS) {
            fprintf(f, "/>\n");
            continue;
        }
        fprintf(f, ">\n      <failure type=\"%s\" message=\"", class_name(c->cls));
        const char *detail = c->detail ? c->detail : "";
        char *first = xstrdup(detail);
        first[strcspn(first, "\n")] = '\0';
        xml_escaped(f, first);
        free(first);
        fprintf(f, "\">");
        xml_escaped(f, detail);
        fprintf(f, "</failure>\n    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    bool ok = !ferror(f);
    if (fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "pl-grade: cannot write %s\n", path);
    free(path);
    return ok;
}

/* ---------------------------------------------------------------- cases.json */

static bool write_cases(const char *dir, const case_list *cases)
{
    cJSON *all = cJSON_CreateArray();
    for (int i = 0; i < cases->count; i++) {
        const case_result *c = &cases->v[i];
        cJSON *o = c->json ? cJSON_Duplicate(c->json, true) : cJSON_CreateObject();
        // the engine's fields replace any the driver sent under the same names
        static const char *engine_keys[] = {"event", "case", "id", "np", "run", "classification", "detail"};
        for (size_t k = 0; k < sizeof engine_keys / sizeof engine_keys[0]; k++)
            cJSON_DeleteItemFromObjectCaseSensitive(o, engine_keys[k]);
        cJSON_AddStringToObject(o, "case", c->name);
        cJSON_AddStringToObject(o, "id", c->id);
        cJSON_AddNumberToObject(o, "np", c->np);
        if (c->run_label) cJSON_AddStringToObject(o, "run", c->run_label);
        else cJSON_AddNullToObject(o, "run");
        cJSON_AddStringToObject(o, "classification", class_name(c->cls));
        if (c->detail) cJSON_AddStringToObject(o, "detail", c->detail);
        else cJSON_AddNullToObject(o, "detail");
        cJSON_AddItemToArray(all, o);
    }
    bool ok = write_json(dir, "cases.json", all);
    cJSON_Delete(all);
    return ok;
}

bool write_outputs(const char *dir, const char *lab, const grade *g, const case_list *cases)
{
    if (!make_dirs(dir)) {
        fprintf(stderr, "pl-grade: cannot create %s: %s\n", dir, strerror(errno));
        return false;
    }
    bool ok = write_gradescope(dir, lab, g, cases);
    ok = write_junit(dir, lab, cases) && ok;
    ok = write_cases(dir, cases) && ok;
    return ok;
}
