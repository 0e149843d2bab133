/* report.c - what people read on the terminal, and the full report kept in a file.
 *
 * Full view (the default, `make lab-N V=1`): a header, one line per case as it finishes
 * (with a running pass count), then a summary table per rubric item, the first failure
 * with the command that reruns it, and the final `score: X / Y` line.
 *
 * Brief view (--brief, what `make lab-N` prints): per world size one progress line, a mark
 * per rubric group (updated in place on a terminal, printed once the world size is done
 * elsewhere), then the summary table with the first three failed cases under each group,
 * the first failure's rerun command and handout section, and the score line. The full
 * view's text always goes to the report file (--report, --out DIR/report.txt), so nothing
 * is lost by printing less.
 *
 * Text that came from a student's program (driver messages, stderr lines, compiler
 * output) is cleaned before it gets here and is only ever printed indented or after a
 * label, one line at a time: nothing a student writes can start a line at column 0, so no
 * forged `score:` line can appear. Cases of hidden runs are never printed one by one.
 * Colours only on a terminal and only without NO_COLOR; never in the report file. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // defines: isatty

#include "engine.h"

#define ID_WIDTH 40
#define DETAIL_INDENT "              "  // lines under a case line start below its id
#define BUILD_LINES_SHOWN 30
#define BRIEF_FAILURES_PER_GROUP 3
#define BRIEF_NOTES_MAX 10
#define BRIEF_DETAIL_MAX 90   // bytes of a failure's reason on its one line
#define DRAW_INTERVAL_S 0.1   // a live progress line is redrawn at most this often

static const char *paint(const console *con, const char *code)
{
    return con->color ? code : "";
}
#define RED "\033[31m"
#define GREEN "\033[32m"
#define BOLD "\033[1m"
#define DIM "\033[2m"
#define RESET "\033[0m"

/* Where a line goes: the terminal, the report file, or both. */
enum { TO_TERM = 1, TO_FILE = 2, TO_BOTH = 3 };

const char *class_name(classification c)
{
    switch (c) {
    case CL_PASS: return "pass";
    case CL_WRONG: return "wrong";
    case CL_FORBIDDEN: return "forbidden";
    case CL_ERROR: return "error";
    case CL_CRASH: return "crash";
    case CL_TIMEOUT: return "timeout";
    case CL_DEADLOCK: return "deadlock";
    case CL_TAMPERED: return "tampered";
    case CL_MISSING: return "missing";
    case CL_BUILD_ERROR: return "build error";
    }
    return "?";
}

/* ---------------------------------------------------------------- output */

/* Append to the report text, without the colour codes (the only escape sequences that can
 * reach this point: text from a child was cleaned of every control byte). */
static void keep(console *con, const char *text)
{
    size_t n = strlen(text);
    if (con->full_len + n + 1 > con->full_cap) {
        while (con->full_len + n + 1 > con->full_cap) con->full_cap = con->full_cap ? 2 * con->full_cap : 16384;
        con->full = xrealloc(con->full, con->full_cap);
    }
    for (const char *p = text; *p; p++) {
        if (*p == '\033' && p[1] == '[') {
            p += 2;
            while (*p && *p != 'm') p++;
            if (!*p) break;
            continue;
        }
        con->full[con->full_len++] = *p;
    }
    con->full[con->full_len] = '\0';
}

static void end_live_line(console *con)
{
    if (!con->live) return;
    fputs("\r\033[K", stdout);  // the progress line is drawn again after what comes now
    con->live = false;
}

static void out(console *con, int where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void out(console *con, int where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0) die_engine("out of memory");
    if (where & TO_TERM) {
        end_live_line(con);
        fputs(text, stdout);
    }
    if (where & TO_FILE) keep(con, text);
    free(text);
}

/* Lines of a detail text, each indented under the case line (a carriage return would move
 * back to column 0, so it ends a line too). */
static void print_detail(console *con, int where, const char *detail)
{
    const char *p = detail;
    while (*p) {
        size_t n = strcspn(p, "\n\r");
        out(con, where, DETAIL_INDENT "%.*s\n", (int)n, p);
        p += n;
        if (*p) p++;
    }
}

void console_init(console *con, bool quiet)
{
    *con = (console){.quiet = quiet, .id_width = ID_WIDTH};
    con->tty = isatty(STDOUT_FILENO);
    con->color = con->tty && getenv("NO_COLOR") == NULL;
}

void console_free(console *con)
{
    for (int i = 0; i < con->n_seen; i++) {
        free(con->seen[i].id);
        free(con->seen[i].name);
        free(con->seen[i].label);
        free(con->seen[i].detail);
    }
    free(con->seen);
    free(con->full);
    free(con->world_label);
}

/* The public group items of the rubric: one progress mark each, in rubric order. */
static bool is_mark_group(const rubric_item *it)
{
    return it->kind == ITEM_GROUP && !it->hidden;
}

void console_header(console *con, const char *lab, const char *driver, const int *np, int n_np, int n_extra_runs)
{
    int where = con->quiet ? TO_FILE : TO_BOTH;
    out(con, where, "%spl-grade: lab %s%s, driver %s, world sizes", paint(con, BOLD), lab, paint(con, RESET), driver);
    for (int i = 0; i < n_np; i++) out(con, where, " %d", np[i]);
    if (n_extra_runs) out(con, where, " (+%d extra run%s)", n_extra_runs, n_extra_runs == 1 ? "" : "s");
    out(con, where, "\n");
    if (con->brief && con->rub) {
        out(con, TO_TERM, "groups:");
        for (int i = 0; i < con->rub->n_items; i++)
            if (is_mark_group(&con->rub->items[i])) out(con, TO_TERM, " %s", con->rub->items[i].name);
        out(con, TO_TERM, "  (a mark each: = passed, x failed, - none ran)\n");
    }
    fflush(stdout);
}

/* The brief view keeps the notes a reader must see (leftovers killed, the sandbox, hidden
 * runs, a run stopped between cases) and leaves the rest (commands, restarts) to the file. */
static bool note_for_brief(const char *text)
{
    static const char *const kept[] = {"note:", "hidden", "no hidden", "sandbox:"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (!strncmp(text, kept[i], strlen(kept[i]))) return true;
    return false;
}

void console_note(console *con, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) text = NULL;
    va_end(ap);
    if (!text) return;
    for (char *p = text; *p; p++)  // one line, whatever a quoted reason held
        if (*p == '\n' || *p == '\r') *p = ' ';
    int where = TO_BOTH;
    if (con->quiet) where = TO_FILE;
    if (con->brief && !note_for_brief(text)) where = TO_FILE;
    if (con->brief && (where & TO_TERM) && ++con->notes_shown > BRIEF_NOTES_MAX) {
        where = TO_FILE;
        if (con->notes_shown == BRIEF_NOTES_MAX + 1) out(con, TO_TERM, "(more notes in the full report)\n");
    }
    out(con, where, "%s%s%s\n", paint(con, DIM), text, paint(con, RESET));
    free(text);
    fflush(stdout);
}

/* ---------------------------------------------------------------- cases */

/* What a passing case measured, briefly: bandwidth when the driver timed it. */
static void pass_info(const case_result *c, char *buf, size_t size)
{
    double busbw, lib, t;
    buf[0] = '\0';
    if (case_number(c, "busbw", &busbw)) {
        int n = snprintf(buf, size, "busbw %.2f GB/s", busbw);
        if (case_number(c, "lib_busbw", &lib) && n > 0 && (size_t)n < size)
            snprintf(buf + n, size - (size_t)n, " (lib %.2f)", lib);
    } else if (case_number(c, "time_us", &t)) {
        snprintf(buf, size, "%.1f us", t);
    }
}

/* Does a rubric item select this case (the same rule as the scoring)? */
static bool item_selects(const rubric_item *it, const seen_case *s)
{
    case_result c = {.id = s->id, .name = s->name, .np = s->np, .run_label = s->label, .whole_run = s->whole_run};
    for (int i = 0; i < it->globs.count; i++)
        if (case_matches(&c, it->globs.items[i])) return true;
    return false;
}

static bool same_world(const console *con, int np, const char *label)
{
    if (con->world_np != np) return false;
    if (!con->world_label || !label) return !con->world_label && !label;
    return !strcmp(con->world_label, label);
}

/* The progress line of the world size now running: a mark per public rubric group. */
static void world_line(console *con, bool final)
{
    if (!con->world_np || !con->rub) return;
    int total = 0, failed = 0;
    for (int i = con->world_from; i < con->n_seen; i++) {
        total++;
        failed += con->seen[i].cls != CL_PASS;
    }
    char name[200];
    snprintf(name, sizeof name, "np %d%s%s", con->world_np, con->world_label ? "@" : "",
             con->world_label ? con->world_label : "");
    char *marks = xmalloc((size_t)con->rub->n_items + 1);
    int n = 0;
    for (int i = 0; i < con->rub->n_items; i++) {
        const rubric_item *it = &con->rub->items[i];
        if (!is_mark_group(it)) continue;
        int sel = 0, bad = 0;
        for (int k = con->world_from; k < con->n_seen; k++) {
            if (!item_selects(it, &con->seen[k])) continue;
            sel++;
            bad += con->seen[k].cls != CL_PASS;
        }
        marks[n++] = bad ? 'x' : sel ? '=' : final ? '-' : ' ';
    }
    marks[n] = '\0';
    end_live_line(con);
    printf("  %-6s [%s] %6d cases", name, marks, total);
    if (failed) printf(", %s%d failed%s", paint(con, RED), failed, paint(con, RESET));
    else if (total) printf(", %sall passed%s", paint(con, GREEN), paint(con, RESET));
    if (final) {
        printf("\n");
    } else {
        con->live = true;
        con->last_draw = now_seconds();
    }
    free(marks);
    fflush(stdout);
}

static void end_world(console *con)
{
    if (con->brief && con->world_np) world_line(con, true);
    con->world_np = 0;
}

static seen_case *remember(console *con, const case_result *c, const classification *before)
{
    if (before)  // a revision: the case was seen already
        for (int i = con->n_seen - 1; i >= 0; i--)
            if (!strcmp(con->seen[i].id, c->id)) {
                con->seen[i].cls = c->cls;
                free(con->seen[i].detail);
                con->seen[i].detail = c->detail ? xstrdup(c->detail) : NULL;
                return &con->seen[i];
            }
    if (con->n_seen == con->cap_seen) {
        con->cap_seen = con->cap_seen ? 2 * con->cap_seen : 256;
        con->seen = xrealloc(con->seen, (size_t)con->cap_seen * sizeof *con->seen);
    }
    seen_case *s = &con->seen[con->n_seen++];
    *s = (seen_case){.id = xstrdup(c->id), .name = xstrdup(c->name), .label = c->run_label ? xstrdup(c->run_label) : NULL,
                     .detail = c->detail ? xstrdup(c->detail) : NULL, .np = c->np, .cls = c->cls,
                     .whole_run = c->whole_run};
    return s;
}

void console_case(console *con, const case_result *c, const classification *before)
{
    if (!before) con->done++;
    else if (*before == CL_PASS) con->passed--;
    if (c->cls == CL_PASS) con->passed++;

    // the line of the world size that ended counts its own cases only, not this one
    bool new_world = !before && !same_world(con, c->np, c->run_label);
    if (new_world) end_world(con);
    seen_case *s = remember(con, c, before);
    if (new_world) {
        con->world_np = s->np;
        free(con->world_label);
        con->world_label = s->label ? xstrdup(s->label) : NULL;
        con->world_from = con->n_seen - 1;
    }

    int where = TO_BOTH;
    if (con->brief || (con->quiet && c->cls == CL_PASS)) where = TO_FILE;
    char info[128] = "";
    if (c->cls == CL_PASS) pass_info(c, info, sizeof info);
    out(con, where, "  %s%-11s%s %-*s %s%s[%d/%d passed]%s\n", paint(con, c->cls == CL_PASS ? GREEN : RED),
        class_name(c->cls), paint(con, RESET), con->id_width, c->id, info, info[0] ? "   " : "", con->passed,
        con->done, before ? " (revised)" : "");
    if (c->detail) print_detail(con, where, c->detail);
    if (con->brief && con->tty && now_seconds() - con->last_draw >= DRAW_INTERVAL_S) world_line(con, false);
    fflush(stdout);
}

void console_build_failure(console *con, const case_result *build, const char *full_output)
{
    out(con, TO_BOTH, "  %s%s%s %s\n", paint(con, RED), build->cls == CL_FORBIDDEN ? "forbidden at build" : "build error",
        paint(con, RESET), build->detail);
    if (full_output && full_output[0]) {
        // the end of the compiler's output is where the context for its first error usually is
        const char *p = full_output + strlen(full_output);
        int lines = 0;
        while (p > full_output && lines <= BUILD_LINES_SHOWN)
            if (*--p == '\n') lines++;
        if (p > full_output) p++;
        int where = con->quiet ? TO_FILE : TO_BOTH;
        out(con, where, "%s  build output%s:\n", paint(con, DIM), lines > BUILD_LINES_SHOWN ? " (last lines)" : "");
        print_detail(con, where, p);
        out(con, where, "%s", paint(con, RESET));
    }
    fflush(stdout);
}

/* ---------------------------------------------------------------- the summary */

/* One failed case on one line: class, id, the first line of its reason, cut short. */
static void brief_failure(console *con, const seen_case *s, int id_width)
{
    char *reason = s->detail ? xstrdup(s->detail) : xstrdup("");
    reason[strcspn(reason, "\n\r")] = '\0';
    flatten_text(reason, BRIEF_DETAIL_MAX);
    out(con, TO_TERM, "      %s%-9s%s %-*s %s\n", paint(con, RED), class_name(s->cls), paint(con, RESET), id_width, s->id,
        reason);
    free(reason);
}

/* Under a failed group: its first BRIEF_FAILURES_PER_GROUP failed cases. */
static void brief_group_failures(console *con, const rubric_item *it)
{
    const seen_case *shown[BRIEF_FAILURES_PER_GROUP];
    int n = 0, width = 0;
    for (int i = 0; i < con->n_seen && n < BRIEF_FAILURES_PER_GROUP; i++) {
        const seen_case *s = &con->seen[i];
        if (s->cls == CL_PASS || !item_selects(it, s)) continue;
        shown[n++] = s;
        int w = (int)strlen(s->id);
        if (w > width) width = w;
    }
    if (width > ID_WIDTH) width = ID_WIDTH;
    for (int i = 0; i < n; i++) brief_failure(con, shown[i], width);
}

/* The first failed public case: what it tests, and the command that reruns only it. */
static void first_failure(console *con, const grade *g)
{
    const seen_case *first = NULL;
    for (int i = 0; i < con->n_seen && !first; i++)
        if (con->seen[i].cls != CL_PASS) first = &con->seen[i];
    if (!first || g->build) return;
    const rubric_item *group = NULL;
    for (int i = 0; i < g->n_items && !group; i++)
        if (g->items[i].item->kind == ITEM_GROUP && !g->items[i].item->hidden && item_selects(g->items[i].item, first))
            group = g->items[i].item;
    out(con, TO_BOTH, "first failure: %s (%s)%s%s\n", first->id, class_name(first->cls), group ? ", group " : "",
        group ? group->name : "");
    if (group && group->section) {
        const char *handout = con->rub && con->rub->handout ? con->rub->handout : NULL;
        out(con, TO_BOTH, "  it tests: %s%ssection %s\n", handout ? handout : "", handout ? ", " : "", group->section);
    }
    // a stand-in for a whole run has no case name to filter on: rerun the world size
    const char *name = first->whole_run ? NULL : first->name;
    if (con->rerun)
        out(con, TO_BOTH, "  rerun only it: %s NP=%d%s%s%s\n", con->rerun, first->np, name ? " T='" : "", name ? name : "",
            name ? "'" : "");
    else
        out(con, TO_BOTH, "  rerun only it: the same pl-grade command with --np %d%s%s%s\n", first->np,
            name ? " --filter '" : "", name ? name : "", name ? "'" : "");
}

void console_summary(console *con, const grade *g, const char *lab)
{
    end_world(con);
    int name_width = 4;
    for (int i = 0; i < g->n_items; i++) {
        int n = (int)strlen(g->items[i].item->name);
        if (n > name_width) name_width = n;
    }
    out(con, TO_BOTH, "\n%ssummary for lab %s%s", paint(con, BOLD), lab, paint(con, RESET));
    if (!g->build) out(con, TO_BOTH, " (%d/%d cases passed)", con->passed, con->done);
    out(con, TO_BOTH, "\n");
    for (int i = 0; i < g->n_items; i++) {
        const item_score *s = &g->items[i];
        char points[48];
        snprintf(points, sizeof points, "%g/%g", s->score, round2(s->item->points));
        out(con, TO_BOTH, "  %-*s %s%-9s%s %s%s\n", name_width, s->item->name, paint(con, s->full ? GREEN : RED), points,
            paint(con, RESET), s->why, s->item->hidden ? " [hidden]" : "");
        if (con->brief && !s->full && s->item->kind == ITEM_GROUP && !s->item->hidden && !g->build)
            brief_group_failures(con, s->item);
    }
    first_failure(con, g);
    if (con->report_path) out(con, con->brief ? TO_BOTH : TO_FILE, "every case, with its reason: %s\n", con->report_path);
    if (con->filter)  // a partial run: the items whose cases were filtered out scored 0
        out(con, TO_BOTH, "score: %g / %g (partial: only the cases T='%s' selects ran)\n", g->score, g->max_score,
            con->filter);
    else out(con, TO_BOTH, "score: %g / %g\n", g->score, g->max_score);
    fflush(stdout);
}
