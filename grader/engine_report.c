/* engine_report.c - what people read on the terminal: a header, one line per case as it
 * finishes (with a running pass count), then a summary table per rubric item and the
 * final `score: X / Y` line. Colours only on a terminal and only without NO_COLOR.
 *
 * Text that came from a student's program (driver messages, stderr lines, compiler
 * output) is cleaned before it gets here and is only ever printed indented or after a
 * label, one line at a time: nothing a student writes can start a line at column 0, so no
 * forged `score:` line can appear. Cases of hidden runs are never printed one by one. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // defines: isatty

#include "engine.h"

#define ID_WIDTH 40
#define DETAIL_INDENT "              "  // lines under a case line start below its id
#define BUILD_LINES_SHOWN 30

static const char *paint(const console *con, const char *code)
{
    return con->color ? code : "";
}
#define RED "\033[31m"
#define GREEN "\033[32m"
#define BOLD "\033[1m"
#define DIM "\033[2m"
#define RESET "\033[0m"

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

void console_init(console *con, bool quiet)
{
    *con = (console){.quiet = quiet, .id_width = ID_WIDTH};
    con->color = isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;
}

void console_header(console *con, const char *lab, const char *driver, const int *np, int n_np, int n_extra_runs)
{
    if (con->quiet) return;
    printf("%spl-grade: lab %s%s, driver %s, world sizes", paint(con, BOLD), lab, paint(con, RESET), driver);
    for (int i = 0; i < n_np; i++) printf(" %d", np[i]);
    if (n_extra_runs) printf(" (+%d extra run%s)", n_extra_runs, n_extra_runs == 1 ? "" : "s");
    printf("\n");
    fflush(stdout);
}

void console_note(console *con, const char *fmt, ...)
{
    if (con->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) text = NULL;
    va_end(ap);
    if (!text) return;
    for (char *p = text; *p; p++)  // one line, whatever a quoted reason held
        if (*p == '\n' || *p == '\r') *p = ' ';
    printf("%s%s%s\n", paint(con, DIM), text, paint(con, RESET));
    free(text);
    fflush(stdout);
}

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

/* Lines of a detail text, each indented under the case line (a carriage return would move
 * back to column 0, so it ends a line too). */
static void print_detail(const char *detail)
{
    const char *p = detail;
    while (*p) {
        size_t n = strcspn(p, "\n\r");
        printf(DETAIL_INDENT "%.*s\n", (int)n, p);
        p += n;
        if (*p) p++;
    }
}

void console_case(console *con, const case_result *c, const classification *before)
{
    if (!before) con->done++;
    else if (*before == CL_PASS) con->passed--;
    if (c->cls == CL_PASS) con->passed++;
    if (con->quiet && c->cls == CL_PASS) return;

    char info[128] = "";
    if (c->cls == CL_PASS) pass_info(c, info, sizeof info);
    printf("  %s%-11s%s %-*s %s%s[%d/%d passed]%s\n", paint(con, c->cls == CL_PASS ? GREEN : RED),
           class_name(c->cls), paint(con, RESET), con->id_width, c->id, info, info[0] ? "   " : "", con->passed,
           con->done, before ? " (revised)" : "");
    if (c->detail) print_detail(c->detail);
    fflush(stdout);
}

void console_build_failure(console *con, const case_result *build, const char *full_output)
{
    printf("  %s%s%s %s\n", paint(con, RED), build->cls == CL_FORBIDDEN ? "forbidden at build" : "build error",
           paint(con, RESET), build->detail);
    if (!con->quiet && full_output && full_output[0]) {
        // the end of the compiler's output is where the context for its first error usually is
        const char *p = full_output + strlen(full_output);
        int lines = 0;
        while (p > full_output && lines <= BUILD_LINES_SHOWN)
            if (*--p == '\n') lines++;
        if (p > full_output) p++;
        printf("%s  build output%s:\n", paint(con, DIM), lines > BUILD_LINES_SHOWN ? " (last lines)" : "");
        print_detail(p);
        fputs(paint(con, RESET), stdout);
    }
    fflush(stdout);
}

void console_summary(console *con, const grade *g, const char *lab)
{
    int name_width = 4;
    for (int i = 0; i < g->n_items; i++) {
        int n = (int)strlen(g->items[i].item->name);
        if (n > name_width) name_width = n;
    }
    printf("\n%ssummary for lab %s%s", paint(con, BOLD), lab, paint(con, RESET));
    if (!g->build) printf(" (%d/%d cases passed)", con->passed, con->done);
    printf("\n");
    for (int i = 0; i < g->n_items; i++) {
        const item_score *s = &g->items[i];
        char points[48];
        snprintf(points, sizeof points, "%g/%g", s->score, round2(s->item->points));
        printf("  %-*s %s%-9s%s %s%s\n", name_width, s->item->name, paint(con, s->full ? GREEN : RED), points,
               paint(con, RESET), s->why, s->item->hidden ? " [hidden]" : "");
    }
    printf("score: %g / %g\n", g->score, g->max_score);
    fflush(stdout);
}
