/* engine.h - the ParaLab grading engine (pl-grade): shared types and the functions each
 * engine_*.c file provides. One concern per file:
 *
 *   engine.c         command line, the order of the steps, the exit code
 *   engine_util.c    memory, strings, string lists, globs, sizes, text clean-up
 *   engine_rubric.c  the rubric file format (docs/grader.md)
 *   engine_child.c   running one child process safely: own session, pipes read with
 *                    poll(), bounded capture, stderr markers, no-progress timeout
 *   engine_cases.c   running a driver per world size, the JSON-lines protocol,
 *                    classification of every case, restarts after an abnormal end
 *   engine_score.c   scoring rubric items from the cases
 *   engine_report.c  the console report: a line per case, the summary, the score line
 *   engine_output.c  results.json (Gradescope), junit.xml, cases.json
 *
 * The engine never trusts the student's program: everything it reads from a child is
 * bounded, cleaned of bytes that are not UTF-8, and only used to fail cases, never to
 * pass them (a pass comes only from the driver's own verdict). */
#ifndef PL_ENGINE_H
#define PL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>  // defines: cJSON, cJSON_Parse, cJSON_GetObjectItem...

/* ---------------------------------------------------------------- utilities */

/* A growable array of owned strings. */
typedef struct {
    char **items;
    int count, cap;
} strlist;

void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void strlist_push(strlist *l, const char *s);
void strlist_push_all(strlist *l, const strlist *from);
void strlist_free(strlist *l);
/* Split on blanks; no quoting (documented: --mpirun and rubric tokens never need it). */
void strlist_split(strlist *l, const char *text);
char *strlist_join(const strlist *l, const char *sep);

/* "pl-grade: error: ..." on stderr, exit 2 (usage and configuration errors). */
void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

double now_seconds(void);  // monotonic clock
/* Replace control bytes (except tab) and bytes that are not valid UTF-8 with '?', in place,
 * so student output can go into JSON, XML and the terminal safely. */
void clean_text(char *s);
void clean_text_keep_lines(char *s);  // the same, newlines kept
/* fnmatch() without flags: '*' also matches '.' and '/'. */
bool glob_match(const char *glob, const char *text);
/* "64M" -> 67108864 (K, M, G are powers of 1024, as in nccl-tests); false if malformed. */
bool parse_size(const char *s, double *out);
bool parse_number(const char *s, double *out);
/* Round to 2 decimals; scores are compared and printed after this. */
double round2(double x);

/* ---------------------------------------------------------------- rubric */

typedef enum { ITEM_GROUP, ITEM_PERF } item_kind;
typedef enum { METRIC_BYTES, METRIC_MSGS, METRIC_SPEED } perf_metric;

typedef struct {
    item_kind kind;
    char *name;
    double points;
    strlist globs;       // group: its cases; perf: `cases` globs (empty = parent's globs)
    char *parent;        // perf only
    perf_metric metric;  // perf only
    double target;       // perf only, default 1.0
    double min_bytes;    // perf only, speed: cases below this size are ignored
    bool hidden;         // came from the instructor's hidden rubric
} rubric_item;

/* An extra driver run: `run np=N [label=L] args...`. */
typedef struct {
    int np;
    char *label;
    strlist args;
} rubric_run;

typedef struct {
    char *lab;
    double timeout_s;      // per case: no new line in the JSON file for this long
    double run_timeout_s;  // cap on one driver run, whatever the progress
    char *watchdog;        // passed as --watchdog, NULL = not passed
    int *np;
    int n_np;
    strlist args, test_args;
    bool have_test_args;
    rubric_run *runs;
    int n_runs;
    rubric_item *items;
    int n_items;
} rubric;

/* Parse `path` into `r` (adding to what is there). A hidden rubric may hold only `lab`,
 * `run`, `group` and `perf` lines. Errors are fatal (die_usage with file:line). */
void rubric_load(rubric *r, const char *path, bool hidden);
/* Cross-checks after every file is loaded: names unique, perf parents exist. */
void rubric_check(const rubric *r, const char *path);
const rubric_item *rubric_find(const rubric *r, const char *name);
double rubric_total_points(const rubric *r);
void rubric_free(rubric *r);

/* ---------------------------------------------------------------- child processes */

#define CAPTURE_HALF (32 * 1024)  // keep the first and the last 32 KiB of each stream
#define MARKER_LINES_MAX 16

/* The first CAPTURE_HALF bytes and the last CAPTURE_HALF bytes of a stream. */
typedef struct {
    char head[CAPTURE_HALF];
    char tail[CAPTURE_HALF];  // ring buffer
    size_t head_len, tail_len, tail_pos;
    size_t total;
} capture;

/* Splits a stream into lines to look for the markers the harness and Open MPI print. */
typedef struct {
    char buf[1024];
    size_t len;
    bool overflow;  // the current line is longer than buf; only its start is examined
} line_scanner;

typedef void (*json_line_fn)(void *ctx, char *line);

typedef struct {
    /* in */
    char **argv;              // NULL-terminated
    bool merge_stderr;        // one pipe for both streams (keeps a compiler's order)
    const char *json_path;    // file the driver appends to; NULL = none
    json_line_fn on_line;     // called for every complete line of json_path
    void *ctx;
    double no_progress_s;     // 0 = no per-line timeout
    double total_s;           // 0 = no overall cap
    /* out */
    int exit_code;            // -1 when killed by a signal
    int term_signal;          // 0 when it exited
    bool timed_out;           // we killed it: no progress for no_progress_s
    bool hit_cap;             // we killed it: ran longer than total_s
    bool interrupted;         // we killed it: the engine got SIGINT/SIGTERM
    bool exec_failed;
    double wall_s;
    capture out, err;
    line_scanner scan_out, scan_err;
    strlist deadlock_lines;   // lines containing "waits in"
    strlist crash_lines;      // "crashed with signal", "exited on signal"
} child_run;

/* Set by the engine's SIGINT/SIGTERM handler; a running child is then killed. */
extern volatile int engine_interrupted;

/* Run to completion (or kill). Never blocks on the child for longer than the limits. */
void child_run_exec(child_run *r);
void child_run_free(child_run *r);
/* The captured text, with a "[... N bytes omitted ...]" line where the middle was dropped. */
char *capture_text(const capture *c);
/* The last non-empty line of a capture (malloc'd, cleaned), or NULL. */
char *capture_last_line(const capture *c);
/* The first line containing `needle` (malloc'd, cleaned), or NULL. */
char *capture_find_line(const capture *c, const char *needle);

/* ---------------------------------------------------------------- cases */

typedef enum {
    CL_PASS,
    CL_WRONG,
    CL_FORBIDDEN,
    CL_ERROR,
    CL_CRASH,
    CL_TIMEOUT,
    CL_DEADLOCK,
    CL_BUILD_ERROR,
} classification;

const char *class_name(classification c);

typedef struct {
    char *id;         // "np4/allreduce_ring.oop.c1024", or "np4@seed7/..." from a run line
    char *name;       // the driver's case name
    char *run_label;  // NULL for the world-size sweep, else the run line's label
    int np;
    classification cls;
    char *detail;     // why it failed, may hold several lines; NULL on pass
    cJSON *json;      // the driver's result object, or NULL if it never reported one
    bool whole_run;   // a stand-in for cases a failed run never reached: counts in every group
} case_result;

typedef struct {
    case_result *v;
    int count, cap;
    int passed;
} case_list;

/* Everything a driver run needs, from the command line and the rubric. */
typedef struct {
    const rubric *rub;
    const char *driver;
    strlist mpirun;     // split --mpirun
    const char *filter, *device, *comm;
    bool test_scale;
    const char *work_dir;  // where the JSON-lines files go
} run_config;

struct console;

/* Run the driver at world size np (label NULL: the sweep with the rubric's args; else an
 * extra `run` line), restarting after abnormal ends, appending every case to `cases`. */
void run_world(const run_config *cfg, int np, const rubric_run *extra, case_list *cases,
               struct console *con);
void case_list_free(case_list *l);
/* Does a rubric glob select this case? A glob with '/' matches the id, else the name. */
bool case_matches(const case_result *c, const char *glob);
/* A numeric field of the driver's result, if present. */
bool case_number(const case_result *c, const char *field, double *out);

/* ---------------------------------------------------------------- scoring */

typedef struct {
    const rubric_item *item;
    double score;  // rounded to 2 decimals
    bool full;
    char *why;     // one line for the summary table
    char *output;  // longer text for results.json (failed cases and their reasons)
} item_score;

typedef struct {
    item_score *items;
    int n_items;
    double score, max_score;  // rounded to 2 decimals
    char *build_error;        // NULL unless the build failed
} grade;

/* build_error != NULL: every item scores 0 with that reason. */
void grade_compute(grade *g, const rubric *r, const case_list *cases, const char *build_error);
void grade_free(grade *g);

/* ---------------------------------------------------------------- reports */

typedef struct console {
    bool color, quiet;
    int done, passed;
    int id_width;
} console;

void console_init(console *con, bool quiet);
void console_header(console *con, const char *lab, const char *driver, const int *np, int n_np,
                    int n_extra_runs);
void console_note(console *con, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void console_case(console *con, const case_result *c);
void console_build_error(console *con, const char *first_line, const char *full_output);
void console_summary(console *con, const grade *g, const char *lab);

/* results.json (Gradescope), junit.xml and cases.json under dir; false on I/O error. */
bool write_outputs(const char *dir, const char *lab, const grade *g, const case_list *cases);

#endif
