/* output.c - the reports under --out DIR (and --report FILE):
 *   results.json  Gradescope's autograder format, one test per rubric item;
 *   junit.xml     one testcase per case, for CI dashboards;
 *   cases.json    every case: the driver's result fields plus id, np, run, classification,
 *                 detail (the raw material for an instructor's own analysis);
 *   report.txt    the full console report (every case and its reason), without colours.
 *
 * The directory may lie in a student's reach, so nothing here follows a symbolic link:
 * --out and every directory created on the way are opened with O_NOFOLLOW, and each file is
 * written under a fresh temporary name (O_CREAT | O_EXCL | O_NOFOLLOW) in that directory
 * and renamed into place, which replaces whatever sits at the final name (a planted link
 * included) instead of writing through it.
 *
 * Hidden cases: their details and hidden items carry "visibility": "after_published", so
 * Gradescope shows them only once the instructor publishes the grades. */
#include <errno.h>
#include <fcntl.h>     // defines: openat, O_DIRECTORY, O_NOFOLLOW
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // defines: mkdirat
#include <unistd.h>

#include "engine.h"

/* ---------------------------------------------------------------- the directory */

/* Open (creating where missing) every component of `dir` without following a link. O_PATH:
 * passing through a directory needs search permission only (a class job's user reaches its
 * OUT through parents that are o+x, not o+r), and the descriptor serves openat and mkdirat. */
static int open_dir_nofollow(const char *dir, char **why)
{
    char *path = xstrdup(dir);
    int fd = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char *save = NULL;
    for (char *part = strtok_r(path, "/", &save); part && fd >= 0; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, ".")) continue;
        if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
            *why = xasprintf("cannot create %s: %s", part, strerror(errno));
            close(fd);
            fd = -1;
            break;
        }
        int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            *why = errno == ELOOP || errno == ENOTDIR
                       ? xasprintf("%s is a symbolic link or not a directory (give the real path)", part)
                       : xasprintf("cannot open %s: %s", part, strerror(errno));
        close(fd);
        fd = next;
    }
    free(path);
    return fd;
}

char *make_out_dir(const char *dir)
{
    char *why = NULL;
    int fd = open_dir_nofollow(dir, &why);
    if (fd < 0) return why ? why : xstrdup(strerror(errno));
    close(fd);
    return NULL;
}

/* Write text to dir/name through a temporary file and a rename. */
static bool write_file(int dirfd, const char *dir, const char *name, const char *text)
{
    char suffix[17];
    random_hex(suffix, 8);
    char *tmp = xasprintf(".%s.%s", name, suffix);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    bool ok = fd >= 0;
    size_t len = strlen(text), done = 0;
    while (ok && done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) done += (size_t)n;
    }
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok && renameat(dirfd, tmp, dirfd, name) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "pl-grade: cannot write %s/%s: %s\n", dir, name, strerror(errno));
        unlinkat(dirfd, tmp, 0);
    }
    free(tmp);
    return ok;
}

static bool write_json(int dirfd, const char *dir, const char *name, cJSON *root)
{
    char *text = cJSON_Print(root);
    if (!text) die_engine("out of memory");
    char *with_newline = xasprintf("%s\n", text);
    free(text);
    bool ok = write_file(dirfd, dir, name, with_newline);
    free(with_newline);
    return ok;
}

/* ---------------------------------------------------------------- results.json */

static cJSON *gradescope_test(const char *name, double score, double max, bool passed, const char *output,
                              bool withheld)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", name);
    cJSON_AddNumberToObject(t, "score", score);
    cJSON_AddNumberToObject(t, "max_score", max);
    cJSON_AddStringToObject(t, "status", passed ? "passed" : "failed");
    cJSON_AddStringToObject(t, "output", output);
    if (withheld) cJSON_AddStringToObject(t, "visibility", "after_published");
    return t;
}

static bool write_gradescope(int dirfd, const char *dir, const char *lab, const grade *g, const case_list *cases)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "score", g->score);
    // Gradescope's documented keys only: the maximum goes into extra_data
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(root, "extra_data"), "max_score", g->max_score);
    int pub = 0, pub_passed = 0, hidden = 0;
    for (int i = 0; i < cases->count; i++) {
        if (cases->v[i].hidden) {
            hidden++;
        } else {
            pub++;
            pub_passed += cases->v[i].cls == CL_PASS;
        }
    }
    char *summary = g->build ? xasprintf("lab %s: %s: %s", lab, class_name(g->build->cls), g->build->detail)
                             : xasprintf("lab %s: %d/%d cases passed%s", lab, pub_passed, pub,
                                         hidden ? " (hidden cases: after publication)" : "");
    cJSON_AddStringToObject(root, "output", summary);
    free(summary);
    cJSON *tests = cJSON_AddArrayToObject(root, "tests");
    for (int i = 0; i < g->n_items; i++) {
        const item_score *s = &g->items[i];
        bool word = s->item->kind == ITEM_PERF && s->players_word;
        char *out = xasprintf("%s\n%s%s", s->why, s->output,
                              word ? "evidence: counted inside the student's own process (its own word, not yet "
                                     "checked from outside it: docs/grader.md, threat model)\n"
                                   : "");
        // hidden items stay out of the student's view until the instructor publishes grades
        cJSON_AddItemToArray(tests, gradescope_test(s->item->name, s->score, round2(s->item->points), s->full, out,
                                                    s->item->hidden));
        free(out);
        if (s->hidden_output) {  // a public item's hidden failures: named, but withheld
            char *name = xasprintf("%s: hidden cases", s->item->name);
            cJSON_AddItemToArray(tests, gradescope_test(name, 0, 0, false, s->hidden_output, true));
            free(name);
        }
    }
    bool ok = write_json(dirfd, dir, "results.json", root);
    cJSON_Delete(root);
    return ok;
}

/* ---------------------------------------------------------------- junit.xml */

typedef struct {
    char *s;
    size_t len, cap;
} buffer;

static void put(buffer *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 4096;
        b->s = xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void put_str(buffer *b, const char *s)
{
    put(b, s, strlen(s));
}

static void putf(buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buffer *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0) die_engine("out of memory");
    put(b, text, (size_t)n);
    free(text);
}

/* Escaped for an XML 1.0 attribute or text: the five special characters as entities, line
 * breaks as &#10; (kept inside attributes), and every character XML 1.0 forbids (control
 * characters, U+FFFE, U+FFFF, anything that is not UTF-8) dropped. */
static void put_xml(buffer *b, const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    while (*p) {
        unsigned c = *p;
        int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = n > 0;
        for (int i = 1; i < n && ok; i++) ok = (p[i] & 0xC0) == 0x80;
        if (!ok) {
            p++;
            continue;
        }
        unsigned cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
        for (int i = 1; i < n; i++) cp = (cp << 6) | (p[i] & 0x3F);
        bool allowed = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                       (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
        if (allowed) {
            switch (cp) {
            case '&': put_str(b, "&amp;"); break;
            case '<': put_str(b, "&lt;"); break;
            case '>': put_str(b, "&gt;"); break;
            case '"': put_str(b, "&quot;"); break;
            case '\'': put_str(b, "&apos;"); break;
            case '\n': put_str(b, "&#10;"); break;
            case '\r': put_str(b, "&#13;"); break;
            case '\t': put_str(b, "&#9;"); break;
            default: put(b, (const char *)p, (size_t)n);
            }
        }
        p += n;
    }
}

static bool write_junit(int dirfd, const char *dir, const char *lab, const case_list *cases)
{
    buffer b = {0};
    int failures = cases->count - cases->passed;
    putf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    putf(&b, "<testsuites name=\"pl-grade\" tests=\"%d\" failures=\"%d\">\n", cases->count, failures);
    put_str(&b, "  <testsuite name=\"");
    put_xml(&b, lab);
    putf(&b, "\" tests=\"%d\" failures=\"%d\" errors=\"0\">\n", cases->count, failures);
    for (int i = 0; i < cases->count; i++) {
        const case_result *c = &cases->v[i];
        double us = 0;
        put_str(&b, "    <testcase classname=\"");
        put_xml(&b, lab);
        if (c->np) putf(&b, ".np%d", c->np);
        if (c->run_label) {
            put_str(&b, ".");
            put_xml(&b, c->run_label);
        }
        put_str(&b, "\" name=\"");
        put_xml(&b, c->name);
        putf(&b, "\" time=\"%.6f\"", case_number(c, "time_us", &us) && us >= 0 && us < 1e15 ? us * 1e-6 : 0.0);
        if (c->cls == CL_PASS) {
            put_str(&b, "/>\n");
            continue;
        }
        putf(&b, ">\n      <failure type=\"%s\" message=\"", class_name(c->cls));
        const char *detail = c->detail ? c->detail : "";
        char *first = xstrdup(detail);
        first[strcspn(first, "\n")] = '\0';
        put_xml(&b, first);
        free(first);
        put_str(&b, "\">");
        put_xml(&b, detail);
        put_str(&b, "</failure>\n    </testcase>\n");
    }
    put_str(&b, "  </testsuite>\n</testsuites>\n");
    bool ok = write_file(dirfd, dir, "junit.xml", b.s);
    free(b.s);
    return ok;
}

/* ---------------------------------------------------------------- cases.json */

static bool write_cases(int dirfd, const char *dir, const case_list *cases)
{
    cJSON *all = cJSON_CreateArray();
    for (int i = 0; i < cases->count; i++) {
        const case_result *c = &cases->v[i];
        cJSON *o = c->json ? cJSON_Duplicate(c->json, true) : cJSON_CreateObject();
        // the engine's fields replace any the driver sent under the same names
        static const char *engine_keys[] = {"event", "case", "group", "id", "np", "run", "hidden", "classification",
                                            "detail"};
        for (size_t k = 0; k < sizeof engine_keys / sizeof engine_keys[0]; k++)
            cJSON_DeleteItemFromObjectCaseSensitive(o, engine_keys[k]);
        cJSON_AddStringToObject(o, "case", c->name);
        if (c->group) cJSON_AddStringToObject(o, "group", c->group);
        else cJSON_AddNullToObject(o, "group");
        cJSON_AddStringToObject(o, "id", c->id);
        cJSON_AddNumberToObject(o, "np", c->np);
        if (c->run_label) cJSON_AddStringToObject(o, "run", c->run_label);
        else cJSON_AddNullToObject(o, "run");
        cJSON_AddBoolToObject(o, "hidden", c->hidden);
        cJSON_AddStringToObject(o, "classification", class_name(c->cls));
        if (c->detail) cJSON_AddStringToObject(o, "detail", c->detail);
        else cJSON_AddNullToObject(o, "detail");
        cJSON_AddItemToArray(all, o);
    }
    bool ok = write_json(dirfd, dir, "cases.json", all);
    cJSON_Delete(all);
    return ok;
}

bool write_outputs(const char *dir, const char *lab, const grade *g, const case_list *cases)
{
    char *why = NULL;
    int dirfd = open_dir_nofollow(dir, &why);
    if (dirfd < 0) {
        fprintf(stderr, "pl-grade: --out %s: %s\n", dir, why ? why : strerror(errno));
        free(why);
        return false;
    }
    bool ok = write_gradescope(dirfd, dir, lab, g, cases);
    ok = write_junit(dirfd, dir, lab, cases) && ok;
    ok = write_cases(dirfd, dir, cases) && ok;
    close(dirfd);
    return ok;
}

/* ---------------------------------------------------------------- report.txt */

bool write_report(const char *path, const char *text)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    const char *name = path;
    if (slash) {
        name = path + (slash - dir) + 1;
        if (slash == dir) slash[1] = '\0';  // "/report.txt": the root
        else *slash = '\0';
    } else {
        strcpy(dir, ".");
    }
    if (!name[0]) {
        fprintf(stderr, "pl-grade: --report %s: not a file name\n", path);
        free(dir);
        return false;
    }
    char *why = NULL;
    int dirfd = open_dir_nofollow(dir, &why);
    bool ok = dirfd >= 0;
    if (!ok) fprintf(stderr, "pl-grade: --report %s: %s\n", path, why ? why : strerror(errno));
    else ok = write_file(dirfd, dir, name, text ? text : "");
    if (dirfd >= 0) close(dirfd);
    free(why);
    free(dir);
    return ok;
}
