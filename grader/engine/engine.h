/* engine.h - the ParaLab grading engine (pl-grade): shared types and the functions each
 * file of grader/engine/ provides. One concern per file:
 *
 *   main.c            command line, the order of the steps, the exit code
 *   util.c            memory, strings, string lists, globs, sizes, cleaning untrusted text
 *   rubric.c          the rubric file format (docs/grader.md)
 *   metric.c          the table of performance metrics a `perf` item can score
 *   contain.c         keeping a run's processes in check: subreaper, killing leftovers,
 *                     the bubblewrap sandbox, resource limits
 *   channel.c         the results channel: a private socket, one connection, framed lines
 *   protocol.c        the driver protocol (version 2) line by line: what is trusted
 *   child.c           running one child process safely: own session, pipes read with
 *                     poll(), bounded capture, stderr markers, deadlines
 *   cases.c           running a driver per world size, classifying every planned case,
 *                     restarts after an abnormal end, hangs per group
 *   score.c           scoring rubric items from the cases
 *   report.c          the console report: a line per case, the summary, the score line
 *   output.c          results.json (Gradescope), junit.xml, cases.json
 *
 * The engine never trusts the student's program: verdicts come only from the driver's
 * records on a channel the student code cannot name, every record is checked against the
 * driver's own plan, and everything read from a child is bounded and cleaned before it
 * reaches a terminal or a report. */
#ifndef PL_ENGINE_H
#define PL_ENGINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>  // defines: uid_t

#include <cjson/cJSON.h>  // defines: cJSON, cJSON_Parse, cJSON_GetObjectItem...

/* ---------------------------------------------------------------- utilities */

/* A growable array of owned strings, NULL-terminated (usable as argv). */
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
bool strlist_has(const strlist *l, const char *s);
void strlist_free(strlist *l);
/* Split on blanks; no quoting (documented: --mpirun and rubric tokens never need it). */
void strlist_split(strlist *l, const char *text);
char *strlist_join(const strlist *l, const char *sep);

/* "pl-grade: error: ..." on stderr, exit 2 (usage and configuration errors). */
void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* "pl-grade: ..." on stderr, exit 3 (the engine itself cannot go on). */
void die_engine(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

double now_seconds(void);  // monotonic clock
/* The clock of every limit: seconds as a machine that grades alone would spend them (the
 * wall clock slowed by the load of other work, grader/runner/loadclock.h), and the current
 * slowdown. */
double quiet_seconds(void);
double quiet_slowdown(void);
/* Replace control bytes (except tab) and bytes that are not valid UTF-8 with '?', in place,
 * so untrusted text can go into JSON, XML and the terminal safely. */
void clean_text(char *s);
void clean_text_keep_lines(char *s);  // the same, newlines kept
/* A driver message for one line of a report: cleaned, every line break and tab a blank,
 * cut to at most `cap` bytes on a character boundary (with "..." when cut). In place. */
void flatten_text(char *s, size_t cap);
/* Case and group names: 1..NAME_MAX bytes of [A-Za-z0-9._:+=,@-]. */
#define NAME_MAX_BYTES 160
bool valid_name(const char *s);
/* A line with no letter or digit: Open MPI's "-----" banners, blank lines. */
bool banner_line(const char *s);
/* `bytes` random bytes from the kernel as 2*bytes lowercase hex digits (out holds 2n+1). */
void random_hex(char *out, size_t bytes);
/* Removes a directory and everything below it (links removed, not followed). */
void remove_tree(const char *dir);
/* fnmatch() without flags: '*' also matches '.' and '/'. */
bool glob_match(const char *glob, const char *text);
/* "64M" -> 67108864 (K, M, G are powers of 1024, as in nccl-tests); false if malformed. */
bool parse_size(const char *s, double *out);
bool parse_number(const char *s, double *out);
/* Round to 2 decimals; scores are compared and printed after this. */
double round2(double x);

/* ---------------------------------------------------------------- the cases */

typedef enum {
    CL_PASS,
    CL_WRONG,
    CL_FORBIDDEN,
    CL_ERROR,
    CL_CRASH,
    CL_TIMEOUT,
    CL_DEADLOCK,
    CL_TAMPERED,  // the run's records cannot be trusted (forged, out of order, wrong key...)
    CL_MISSING,   // planned, but the driver ended normally without running it
    CL_BUILD_ERROR,
} classification;

const char *class_name(classification c);

typedef struct {
    char *id;         // "np4/allreduce_ring.oop.c1024", or "np4@seed7/..." from a run line
    char *name;       // the driver's case name (or a "(run)" stand-in)
    char *group;      // the driver's group from its plan; NULL for stand-ins
    char *run_label;  // NULL for the world-size sweep, else the run line's label
    int np;
    classification cls;
    char *detail;     // why it failed, may hold several lines; NULL on pass
    cJSON *json;      // the driver's result fields (cleaned), or NULL if it never sent one
    bool whole_run;   // a stand-in for cases a failed run never announced: in every group
    bool hidden;      // from a hidden rubric's run line: never shown to the student
} case_result;

typedef struct {
    case_result *v;
    int count, cap;
    int passed;
} case_list;

void case_list_free(case_list *l);
/* Does a rubric glob select this case? A glob with '/' matches the id, else the name. */
bool case_matches(const case_result *c, const char *glob);
/* A numeric field of the driver's result, if present. */
bool case_number(const case_result *c, const char *field, double *out);

/* ---------------------------------------------------------------- performance metrics */

typedef enum { METRIC_FIELD, METRIC_QUOTIENT } metric_value;  // fields[0], or fields[0]/fields[1]
typedef enum { METRIC_WORST, METRIC_MEDIAN } metric_aggregate;
typedef enum { SAY_TIMES_OPTIMUM, SAY_OF_LIBRARY, SAY_CASES_CLEAN, SAY_RULE_KEPT } metric_phrase;

/* One row of the metric table (metric.c): adding a metric is adding a row. */
typedef struct {
    const char *keyword;          // rubric: `metric KEYWORD`
    const char *fields[2];        // the driver's result fields it reads
    metric_value value;           // how one case's value comes from those fields
    metric_aggregate aggregate;   // how the cases' values become the measured value
    metric_phrase phrase;         // how the summary states it
    bool min_bytes;               // `min-bytes` applies (cases below it are ignored)
    bool players_word;            // counted inside the student's process, not by the referee
    bool traffic;                 // ... unless every case says the referees moved and counted
                                  // it (result field counted_by_referee = 1)
} perf_metric;

const perf_metric *metric_find(const char *keyword);
/* "bytes, msgs, speed, ..." for error messages. */
const char *metric_keywords(void);
/* The measured value of one case; false when the case does not report the fields (or is
 * below min_bytes, for metrics where that applies). */
bool metric_case_value(const perf_metric *m, const case_result *c, double min_bytes, double *out);
/* "bytes_ratio" or "msgs_optimal and msgs_per_rank" (malloc'd). */
char *metric_fields_text(const perf_metric *m);

/* ---------------------------------------------------------------- rubric */

typedef enum { ITEM_GROUP, ITEM_PERF } item_kind;

#define WORLD_SIZE_MAX 1024
#define POINTS_ITEM_MAX 1e6
#define POINTS_TOTAL_MAX 1e9

typedef struct {
    item_kind kind;
    char *name;
    double points;
    strlist globs;              // group: its cases; perf: `cases` globs (empty = parent's globs)
    char *parent;               // perf only
    const perf_metric *metric;  // perf only
    double target;              // perf only, default 1.0
    double min_bytes;           // perf only, metrics with min_bytes: smaller cases ignored
    bool hidden;                // came from the instructor's hidden rubric
    char *section;              // `section NAME TEXT...`: the handout section it tests, or NULL
} rubric_item;

/* An extra driver run: `run np=N [label=L] args...`. */
typedef struct {
    int np;
    char *label;
    strlist args;
    bool hidden;  // from the hidden rubric: its cases and its command line stay private
} rubric_run;

typedef struct {
    char *lab;
    double timeout_s;        // per case, and per stretch of driver work between cases
    double run_timeout_s;    // per world size (and run line), across restarts
    double build_timeout_s;  // the --build command
    double memory_limit;     // bytes of data per process (RLIMIT_DATA)
    char *watchdog;          // passed as --watchdog, NULL = not passed
    int *np;
    int n_np;
    strlist args, test_args;
    bool have_test_args;
    rubric_run *runs;
    int n_runs;
    rubric_item *items;
    int n_items;
    char *handout;           // `handout PATH`: the lab's handout, named beside a section
} rubric;

/* Parse `path` into `r` (adding to what is there). A hidden rubric may hold only `lab`,
 * `run`, `group` and `perf` lines. Errors are fatal (die_usage with file:line). */
void rubric_load(rubric *r, const char *path, bool hidden);
/* Cross-checks after every file is loaded: names unique, perf parents exist, totals. */
void rubric_check(const rubric *r, const char *path);
const rubric_item *rubric_find(const rubric *r, const char *name);
double rubric_total_points(const rubric *r);
void rubric_free(rubric *r);

/* ---------------------------------------------------------------- containment */

/* Resource limits set in a run's child before exec (0 = leave as it is). */
typedef struct {
    double cpu_s;        // RLIMIT_CPU, per process
    double data_bytes;   // RLIMIT_DATA (not RLIMIT_AS: CUDA reserves huge address ranges)
    double fsize_bytes;  // RLIMIT_FSIZE: a bigger file write gets SIGXFSZ
    double nofile;       // RLIMIT_NOFILE
    double nproc;        // RLIMIT_NPROC, sandbox only (it counts the user's processes)
} child_limits;

/* The sandbox of instructor mode (docs/grader.md): bubblewrap, or Landlock where bwrap
 * cannot start (no user namespaces). */
enum { SANDBOX_BWRAP = 1, SANDBOX_LANDLOCK = 2 };
typedef struct {
    bool on;
    int kind;          // SANDBOX_BWRAP or SANDBOX_LANDLOCK (when on)
    int landlock_abi;  // the kernel's Landlock ABI (SANDBOX_LANDLOCK)
    char *scratch;     // SANDBOX_LANDLOCK: the runs' TMPDIR, the one directory they may write
    bool drop_root;   // the engine is root: a run drops to uid/gid 65534 before bwrap
    bool tmpfs_size;  // this bwrap knows --size (bounds /tmp and /dev/shm)
    strlist masks;    // paths hidden behind an empty tmpfs: hidden rubric, --out, work dir
    strlist reveal;   // directories bound read-only at their place: the driver's
    strlist data_src, data_dst;  // the lab's data (--data): bound read-only where the run looks
    char *cwd;
} sandbox;

/* Make the engine a child subreaper: orphans of a run become its children, so no process
 * a student forks can outlive the run unseen. */
void contain_init(void);
/* SIGKILL every descendant of the engine and reap it; returns how many were killed. */
int contain_kill_descendants(void);
/* The command that tells whether bwrap can start a sandbox here (exit 0 if it can). */
void sandbox_probe_argv(strlist *out, bool with_size);
/* The paths that must not be visible inside (hidden rubric, --out, the work directory)
 * and the ones to show again (a driver or working directory under /tmp). Fatal (exit 2)
 * when the driver lies inside a hidden path. */
void sandbox_init(sandbox *sb, const char *hidden_dir, const char *out_dir, const char *work_dir,
                  const char *driver, const strlist *data, const char *launcher);
/* The bwrap command line that runs `argv` in the sandbox, the channel directory (if not
 * NULL) bound read-write. */
void sandbox_argv(strlist *out, const sandbox *sb, const char *channel_dir, char *const *argv);
void sandbox_free(sandbox *sb);
/* What every sandboxed run may read: the system's directories (NULL-terminated). */
extern const char *const sandbox_system_dirs[];
/* The kernel's Landlock ABI version, 0 when it has none (or PL_SANDBOX_NO_LANDLOCK is set). */
int landlock_abi(void);
/* In a run's child, right before exec: lock it and all it starts into the Landlock sandbox. */
bool landlock_confine(const sandbox *sb, const char *channel_dir);
/* In a freshly forked child: drop root (if asked) and set the limits. false on failure. */
bool contain_child_setup(const child_limits *lim, bool drop_root);
/* How many processes the user `uid` has now (for an RLIMIT_NPROC above them). */
int processes_of_user(uid_t uid);
#define SANDBOX_UID 65534

/* ---------------------------------------------------------------- the results channel */

#define LINE_MAX_BYTES (64 * 1024)     // any record
#define PLAN_LINE_MAX (8 * 1024 * 1024)  // the plan record
#define PLAN_CASES_MAX 200000

/* One referee's connection. */
typedef struct {
    int fd;           // -1 after end of file
    int rank;         // -1 until its hello
    uint64_t seq;     // records read (other ranks: the signature's number)
    char ne[33];      // the challenge this connection got (handshake.h)
    char nr[33];      // the referee's nonce from its hello
    char *host;       // the host its hello names (malloc'd), or NULL
    int uid;          // its referee's uid, as its hello says
    bool userns;      // ... and whether a user namespace (a sandbox) holds it
    char *buf;
    size_t len, cap;
} chan_peer;

typedef struct {
    char *dir;          // private (mode 0700, random name), one per run
    char *path;         // the listening socket in it (one host), or NULL
    char *endpoint;     // across hosts: the TCP address referees connect to, "ip:port"
    char key[33];       // 128 random bits as 32 hex digits: handed out after every hello
    char secret[33];    // 128 random bits: what a hello proves it holds (handshake.h)
    int listen_fd;      // -1 once every rank said hello (or on a flood)
    int np;
    const char *lab;
    chan_peer *peers;   // every connection accepted
    int npeers, hellos;
    int refused;        // across hosts: connections closed for a hello without the secret
    bool accepted;      // someone connected
    bool keyed;         // every rank said hello and got the key
    char *tamper;       // why the channel stopped trusting the run (malloc'd), or NULL
    char *abort_case;   // the case a signed abort names (its referee's own), or NULL
    size_t line_max;    // the longest record rank 0 may send next (the protocol sets it)
} channel;

/* A fresh directory under work_dir, owned by `owner` (-1: the engine), for a run of `lab` at
 * np ranks, and the socket the referees connect to: a Unix socket in that directory, or,
 * with tcp_addr ("host" or "host:port", PL_ENGINE_ADDR), a TCP socket there. */
void channel_open(channel *ch, const char *work_dir, int serial, uid_t owner, const char *lab, int np,
                  const char *tcp_addr);
/* Where the ranks ran, once every rank said hello: "node1 (ranks 0,1; referee uid 0),
 * node2 (ranks 2,3; referee uid 0)" (malloc'd), or NULL before. */
char *channel_hosts(const channel *ch);
/* Accept the referees' connections that wait. */
void channel_accept(channel *ch);
/* The descriptors to poll (the listening socket while it is open, every connection). */
struct pollfd;
int channel_pollfds(const channel *ch, struct pollfd *out, int max);
/* Read what arrived (at most `budget` bytes per connection): hellos and the key exchange
 * here; rank 0's records go to fn one line at a time (fn(NULL) for a line over line_max);
 * another rank's only record may be a signed abort. Returns false when fn did, or when the
 * channel stopped trusting the run (ch->tamper says why). */
typedef bool (*line_fn)(void *ctx, const char *line, size_t len);
bool channel_read(channel *ch, size_t budget, line_fn fn, void *ctx);
void channel_close(channel *ch);

/* ---------------------------------------------------------------- the driver protocol */

typedef struct {
    char *name, *group;
} planned_case;

typedef struct {
    planned_case *v;
    int count, cap;
} case_plan;

void plan_push(case_plan *p, const char *name, const char *group);
void plan_free(case_plan *p);

typedef enum { PROTO_PLAN, PROTO_CASES, PROTO_DONE } proto_stage;
typedef enum { PROTO_OK, PROTO_RESULT, PROTO_END, PROTO_TAMPERED } proto_event;

typedef struct {
    /* set before the run */
    const char *key, *lab;
    unsigned char mac_key[16]; // key as bytes: every record is signed with it (siphash.h)
    int np;
    const case_plan *expected;  // the plan this run must announce; NULL: any valid plan
    /* state */
    proto_stage stage;
    case_plan plan;   // as announced
    int next;         // the index of the next case to begin
    int pending;      // the case begun and not finished, -1 if none
    int lines, results, failed, last_result;
    char *tamper;     // why the run is no longer trusted; NULL while it is
    bool stray_result;  // the record that broke the trust was a result with no case running
    /* the record PROTO_RESULT just accepted (the caller takes json and detail) */
    int result_index;
    classification result_cls;
    char *result_detail;
    cJSON *result_json;
} proto_state;

void proto_init(proto_state *p, const char *key, const char *lab, int np, const case_plan *expected);
/* One line from the channel (NULL: a line over the length cap). */
proto_event proto_feed(proto_state *p, const char *line, size_t len);
/* The longest line the protocol accepts next. */
size_t proto_line_max(const proto_state *p);
void proto_free(proto_state *p);

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

typedef double (*deadline_fn)(void *ctx);

typedef struct {
    /* in */
    char **argv;                 // NULL-terminated
    char **envp;                 // NULL: the engine's environment
    bool merge_stderr;           // one pipe for both streams (keeps a compiler's order)
    const child_limits *limits;  // NULL: none
    bool drop_root;              // become uid/gid SANDBOX_UID before exec (sandbox under root)
    const sandbox *landlock;     // non-NULL: confine the child with Landlock before exec
    const char *landlock_chan;   // the channel directory it may write
    channel *chan;               // NULL: no results channel
    line_fn on_line;             // every line of the channel; false = stop trusting: kill
    deadline_fn deadline;        // the next valid event is due by then, on quiet_seconds() (0: none)
    void *ctx;
    double total_s;              // 0 = no overall cap (quiet seconds, like every limit)
    /* out */
    int exit_code;               // -1 when killed by a signal
    int term_signal;             // 0 when it exited
    bool timed_out;              // we killed it: a deadline passed
    bool hit_cap;                // we killed it: ran longer than total_s
    bool interrupted;            // we killed it: the engine got SIGINT/SIGTERM
    bool distrusted;             // we killed it: on_line returned false
    bool exec_failed;
    double wall_s;
    double quiet_s;              // the same run on quiet_seconds(): what limits count
    capture out, err;
    line_scanner scan_out, scan_err;
    strlist deadlock_lines;      // lines containing "waits in"
    strlist crash_lines;         // "crashed with signal", "exited on signal"
} child_run;

/* Set by the engine's SIGINT/SIGTERM handler; a running child is then killed. */
extern volatile int engine_interrupted;

/* Run to completion (or kill). Never blocks on the child for longer than the limits. */
void child_run_exec(child_run *r);
void child_run_free(child_run *r);
/* The captured text, with a "[... N bytes omitted ...]" line where the middle was dropped. */
char *capture_text(const capture *c);
/* Why a program failed, from its output: the last line mentioning "error", else the last
 * line that is not a banner (malloc'd, cleaned), or NULL. */
char *capture_reason(const capture *c);
/* The first line containing `needle` (malloc'd, cleaned), or NULL. */
char *capture_find_line(const capture *c, const char *needle);
/* The first line that is not a banner (malloc'd), or NULL. */
char *capture_first(const capture *c);
/* The first line starting with `prefix` (malloc'd, cleaned), or NULL. */
char *capture_line_starting(const capture *c, const char *prefix);

/* ---------------------------------------------------------------- running the driver */

/* How the case runner reports (the console, in main.c): no call back into reports. */
typedef struct {
    /* a case is classified; `before` is NULL, or its earlier class when a tampering
     * found later revises it */
    void (*on_case)(void *ctx, const case_result *c, const classification *before);
    void (*on_note)(void *ctx, const char *text);
    void *ctx;
} run_reporter;

/* Everything a driver run needs, from the command line and the rubric. */
typedef struct {
    const rubric *rub;
    const char *driver;
    strlist mpirun;        // split --mpirun
    const char *filter, *device, *comm;
    bool test_scale;
    const char *work_dir;  // where each run's channel directory goes
    const char *engine_addr;  // runs across hosts: where the engine listens (PL_ENGINE_ADDR), or NULL
    bool own_tmpdir;       // each run gets a fresh TMPDIR under work_dir, removed after it
    strlist rank_wrapper;  // words the launcher starts instead of the driver, the driver after them
    char **envp;           // the runs' environment (the engine's, cleaned)
    child_limits limits;
    const sandbox *sandbox;  // NULL: the default mode
    run_reporter report;
} run_config;

/* Run the driver at world size np (extra NULL: the sweep with the rubric's args; else an
 * extra `run` line), restarting after abnormal ends, appending every case to `cases`. */
void run_world(const run_config *cfg, int np, const rubric_run *extra, case_list *cases);

/* ---------------------------------------------------------------- scoring */

typedef struct {
    const rubric_item *item;
    double score;         // rounded to 2 decimals
    bool full;
    char *why;            // one line for the summary table
    char *output;         // the failed public cases and their reasons, for results.json
    char *hidden_output;  // the failed hidden cases (instructor only), or NULL
    int hidden_failed;
    bool players_word;    // perf: rests on what the student's process counted (docs/grader.md)
} item_score;

typedef struct {
    item_score *items;
    int n_items;
    double score, max_score;   // rounded to 2 decimals
    const case_result *build;  // the "(build)" stand-in when the build failed, else NULL
} grade;

void grade_compute(grade *g, const rubric *r, const case_list *cases, const case_result *build);
void grade_free(grade *g);

/* ---------------------------------------------------------------- reports */

/* A public case as the console saw it (for the brief view's failures and the first one). */
typedef struct {
    char *id, *name, *label, *detail;
    int np;
    classification cls;
    bool whole_run;
} seen_case;

typedef struct console {
    bool color, quiet;
    int done, passed;
    int id_width;
    /* the brief view (--brief): progress per world size on the terminal, the first failures
     * per rubric group, the first failure's rerun command; the full text goes to a file */
    bool brief, tty;
    const rubric *rub;        // set once the rubric is loaded: groups, sections
    const char *rerun;        // --rerun: the command that reruns a case, before NP=.. T=..
    const char *report_path;  // where the full report is written, named in the summary
    const char *filter;       // --filter: a partial run, said on the score line
    char *full;               // the full report (every case), without colours
    size_t full_len, full_cap;
    seen_case *seen;          // every public case classified, in order
    int n_seen, cap_seen;
    int world_np;             // the world size (and run label) now running, 0 before the first
    char *world_label;
    int world_from;           // its first case in `seen`
    double last_draw;
    bool live;                // a progress line is on the terminal, not yet ended
    int notes_shown;
} console;

void console_init(console *con, bool quiet);
void console_header(console *con, const char *lab, const char *driver, const int *np, int n_np,
                    int n_extra_runs);
void console_note(console *con, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void console_case(console *con, const case_result *c, const classification *before);
void console_build_failure(console *con, const case_result *build, const char *full_output);
void console_summary(console *con, const grade *g, const char *lab);
void console_free(console *con);

/* results.json (Gradescope), junit.xml and cases.json under dir; false on I/O error. */
bool write_outputs(const char *dir, const char *lab, const grade *g, const case_list *cases);
/* Create dir and its missing parents without following a symbolic link. NULL when done,
 * else why not (malloc'd). */
char *make_out_dir(const char *dir);
/* The full report text to `path` (its directory created as for --out, the file replaced
 * through a rename, never written through a link); false on I/O error. */
bool write_report(const char *path, const char *text);

#endif
