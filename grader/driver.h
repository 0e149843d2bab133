/* driver.h - the case runner every lab driver plugs into.
 *
 * A lab driver is a table, as an nccl-tests collective is four callbacks: it fills a
 * drv_lab (its name, its flags, its tests, its extra modes) and calls drv_main(). The runner
 * owns everything else, once for every lab: the world and the backends, the common flags,
 * planning the cases, --list/--filter/-q, the "measure one call" sequence, poisoning,
 * comparing tensors with the harness's tolerance, timing, the results channel to the
 * grading engine, the per-case line on stdout and the exit code.
 *
 * A test (one row) becomes one or more cases: its plan() callback adds instances with their
 * names and parameters (sizes, roots, shapes), before any student code has run. Each case
 * then goes through
 *     setup()      allocate, fill the inputs, compute the reference
 *     run()        the student's call(s): the runner syncs the device, resets the counters,
 *                  calls run(), syncs again and keeps the counters in c->m
 *     check()      compare and judge: drv_fail / drv_forbid / drv_error, drv_num fields
 *     teardown()   free what setup allocated
 * on every rank. A failure on any rank fails the case; the message of the lowest failing
 * rank explains it. Everything a check computes comes from the driver, never from what
 * the student's code printed or returned.
 *
 * Timing policy (one, for every lab): drv_time() = pl_time(), the median over iterations
 * of the slowest rank's time for one iteration (each iteration bracketed by a barrier and
 * a device sync). Grading ratios use it. Lab 1's nccl-tests table also shows pl_time_batch()
 * (back-to-back iterations, total / iterations, averaged over ranks: nccl-tests' time).
 *
 * Protocol with the grading engine: docs/grader.md, "The driver protocol".
 */
#ifndef PL_DRIVER_H
#define PL_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl.h"
#include "pl_instrument.h" // defines: pl_metrics (what the runner counts around run())

#ifdef __cplusplus
extern "C" {
#endif

#define DRV_NAME_MAX 160 /* case names: [A-Za-z0-9._:+=,@-], at most this long */
#define DRV_ARGS 8       /* integer parameters per case */

/* ---------------------------------------------------------------- flags */

typedef enum { DRV_INT, DRV_DOUBLE, DRV_STR, DRV_BYTES } drv_flag_type;

/* A flag of the lab: "--hidden 64". Numbers outside [lo, hi] are a usage error. */
typedef struct {
    const char *name;   /* "--hidden"                                     */
    drv_flag_type type;
    void *value;        /* int *, double *, const char **, size_t *        */
    double lo, hi;      /* accepted range (DRV_INT, DRV_DOUBLE, DRV_BYTES) */
    const char *help;
} drv_flag;

/* The common flags, after parsing. Labs read them through drv_opts(). */
typedef struct {
    size_t min_bytes, max_bytes; /* -b, -e: size sweep (K/M/G suffixes)            */
    double factor;               /* -f: size step (> 1)                            */
    int warmup, iters;           /* -w, -n: timing; -1 = the test's default        */
    bool quiet;                  /* -q: no table, no per-case lines on stdout      */
    const char *filter;          /* --filter GLOB                                  */
} drv_options;
const drv_options *drv_opts(void);

/* ---------------------------------------------------------------- cases */

typedef struct drv_test drv_test;
typedef struct drv_plan drv_plan;

/* One planned case. */
typedef struct {
    char name[DRV_NAME_MAX];
    char group[48];          /* the engine groups hangs by it; the rubric scores by name */
    const drv_test *test;
    int64_t arg[DRV_ARGS];   /* the test's parameters, as its plan() set them           */
} drv_instance;

typedef enum { DRV_PASS = 0, DRV_WRONG, DRV_ERROR, DRV_FORBIDDEN } drv_verdict;

/* A case being run. The fields above the line are the test's to read. */
typedef struct drv_case {
    const drv_instance *inst;
    const char *name;
    const int64_t *arg;       /* inst->arg                                              */
    void *state;              /* the test's own: setup() sets it, teardown() frees it  */
    bool ran;                 /* run() was called: setup passed on every rank (the same on all) */
    pl_metrics m;             /* what run() did on this rank (communication, GEMMs, memory) */
    int rank, world;
    pl_wire wire;             /* ... and what the comm backend handed to MPI/NCCL meanwhile */
    /* ---- the runner's */
    drv_verdict verdict;
    char msg[480];
    char note[480];
    void *fields;             /* the result record under construction */
} drv_case;

/* What run() should have done on this rank, for the runner to compare with the counters
 * (all optional; zero-initialised = nothing expected). */
typedef enum { DRV_BYTES_AVG, DRV_BYTES_MAX } drv_bytes_agg;
typedef struct {
    /* Rules: breaking them fails the case. */
    bool no_collectives;          /* any library collective: forbidden (Lab 1)            */
    bool no_p2p;                  /* any point-to-point message: wrong                    */
    bool exact_collectives;       /* exactly colls[kind] calls of each kind, S = coll_bytes */
    int colls[PL_OP_COUNT];
    double coll_bytes;
    double gemm_flops;            /* exact GEMM flops on this rank when > 0               */
    bool exact_p2p;               /* exactly p2p_bytes sent in p2p_msgs messages          */
    double p2p_bytes, p2p_msgs;
    /* The optimum, reported as ratios (1.0 = optimal) that the rubric's perf rules read. */
    double bytes_optimal;         /* p2p bytes this rank sends at the optimum: a lower
                                     bound, so none at all, or fewer, fails the case    */
    drv_bytes_agg bytes_agg;      /* compare the average over ranks, or the busiest rank */
    double msgs_optimal;          /* messages of the busiest rank at the optimum          */
} drv_model;

struct drv_test {
    const char *name;   /* the case name (or the prefix its plan() uses)             */
    const char *group;  /* default group of its cases                                 */
    /* Add this test's cases (drv_plan_add); NULL: one case named `name`. Runs on every
     * rank, before any student code, so it must depend on flags and the world only. */
    void (*plan)(const drv_test *t, drv_plan *p);
    void (*setup)(drv_case *c);     /* optional */
    void (*run)(drv_case *c);       /* the measured student call(s); NULL: none     */
    void (*check)(drv_case *c);     /* optional: no check means pass                */
    /* What run() should have communicated and computed (optional). Compared after
     * check() when the case has not failed yet. */
    void (*model)(drv_case *c, drv_model *m);
    /* Only when every rank passed: timing and performance fields (optional). */
    void (*perf)(drv_case *c);
    void (*teardown)(drv_case *c);  /* optional */
    const void *data;               /* the row's own data for its callbacks         */
};

/* The case's own state: `size` zeroed bytes, kept in c->state and freed by the runner after
 * teardown() (which frees only what the state points to). */
void *drv_state(drv_case *c, size_t size);

/* Plan a case of test t named by the format; returns it so that plan() can set its args
 * (and its group, which defaults to t->group). */
drv_instance *drv_plan_add(drv_plan *p, const drv_test *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- verdicts and fields */

/* The first call explains the case; a later call of a stronger kind (forbidden > error >
 * wrong) replaces it. Call them on any rank: the runner gathers them. */
void drv_fail(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void drv_forbid(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void drv_error(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of a passing case (rank 0's). */
void drv_note(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool drv_failed(const drv_case *c); /* this rank's verdict so far */
/* A numeric field of the result (rank 0's value is the one reported: reduce first).
 * NaN and infinities become null. */
void drv_num(drv_case *c, const char *key, double value);

/* ---------------------------------------------------------------- checks */

/* Everything below that takes a drv_case reduces over the ranks: every rank must make the
 * same calls in the same order (decide on reduced values, e.g. c->ran or drv_all_ok, never
 * on a rank's own return code alone), or the ranks wait for each other forever. */

/* rc == 0 on every rank? If not, fails the case with what + the code's name (on the ranks
 * where it was not 0; "failed on another rank" elsewhere). The same answer on every rank. */
bool drv_all_ok(drv_case *c, int rc, const char *what, const char *(*name)(int));

/* The tolerance of every float comparison against a float64 reference: relative
 * Frobenius 1e-5 with fp32 GEMMs, 5e-3 where GEMMs run in TF32 (PL_TF32=1 on cuda, which
 * keeps 10 mantissa bits). Decided here, once; the reason in words for messages. */
double drv_tolerance(void);
const char *drv_tolerance_why(void);

/* Compare a device tensor with the expected host array (rows*cols, dense) on every rank:
 * exact = bit for bit (e.g. a weight shard), else relative Frobenius error against
 * drv_tolerance(). NaN fails ("never written?"). Fails the case with `what` in the message;
 * returns the worst relative error over ranks (also kept as the case's rel_err field). */
double drv_check_tensor(drv_case *c, const char *what, pl_tensor got, const float *expected,
                        bool exact);
/* The same for a relative error computed by the test itself (reduced over ranks here). */
double drv_check_error(drv_case *c, const char *what, double rel_err, double tolerance);

/* A device buffer of n floats filled with the poison (a NaN payload): unwritten outputs
 * fail their check. */
float *drv_poisoned(size_t n);

/* Cross-rank reductions of host values (not instrumented: never part of a student's
 * counted traffic). */
double drv_sum(double v);
double drv_max(double v);
double drv_min(double v);
/* Every rank's value of v, into out[world]. */
void drv_allgather_u64(uint64_t v, uint64_t *out);

/* ---------------------------------------------------------------- measuring and timing */

/* Measure fn(arg) the way the runner measures run(): sync, reset the counters, call, sync,
 * read the counters into *m. For tests that measure several phases themselves. */
void drv_measure(void (*fn)(void *), void *arg, pl_metrics *m);
/* Time fn(arg): pl_time with -w/-n when given, else these defaults (see the policy above). */
pl_timing drv_time(void (*fn)(void *), void *arg, int warmup, int iters);
/* Iterations for a message of `bytes` (many for small messages, few for large). */
int drv_iters_for(size_t bytes);
/* The size sweep of -b/-e/-f in elements of 4 bytes: 0 and 1 element first, then
 * min..max by the factor, the largest always included. Returns how many (<= cap). */
size_t drv_sizes(size_t *out, size_t cap);
/* "64M", "1K", "4096" -> bytes; false on a malformed string or more than 1 TiB. */
bool drv_parse_bytes(const char *s, size_t *out);

/* A seed for this rank's inputs of case c that the other ranks cannot know: fresh random
 * bits in a graded run (so no rank can compute another rank's data instead of receiving
 * it; share it with drv_allgather_u64 after the student's call), derived from --seed, the
 * rank and the case name when run by hand (reproducible). */
uint64_t drv_case_seed(const drv_case *c);
/* True when the grading engine runs this driver (results go to its channel). */
bool drv_graded(void);

/* ---------------------------------------------------------------- output */

/* A line on stdout from rank 0 (tables, reports); nothing with -q. */
void drv_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, even with -q (modes that exist to print). */
void drv_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------- the lab */

/* A way to run the driver other than grading: `--run NAME` (make lab-N RUN=NAME, make
 * bench LAB=N, make scaling LAB=N). fn returns the exit code. Every lab also has the mode
 * `cases`: its cases run by hand, with the driver's own report and no score. */
typedef struct {
    const char *name;  /* "bench", "scaling", "predict", "sweep", "train", "chat"     */
    const char *help;
    int (*fn)(void);
    const char *np;    /* world sizes `make lab-N RUN=NAME` uses without NP=, e.g. "1 2 4" */
    const char *post;  /* a script run after every world size, with the output directory
                          (plots), or NULL                                              */
} drv_mode;

typedef struct {
    const char *name;     /* "01-collectives": must equal the rubric's lab line     */
    const char *title;    /* one line for --help                                     */
    const drv_flag *flags;        /* ends with a {NULL} row; may be NULL              */
    const drv_test *tests;        /* ends with a {NULL} row                           */
    const drv_mode *modes;        /* ends with a {NULL} row; may be NULL              */
    const drv_options *defaults;  /* the common flags' defaults, or NULL: sizes 0..64M
                                     by x2, the tests' own warm-up and iterations       */
    /* After the flags are parsed, before planning: validate them (pl_usage_error) and set
     * up what every case shares. Optional. */
    void (*init)(void);
    /* After the last case, before the summary line (tables, predictions). Optional. */
    void (*finish)(void);
    /* When a case has finished, on every rank, with its final verdict (table lines that
     * span cases). With it, the runner prints only the failures' reasons itself. */
    void (*after_case)(const drv_case *c);
} drv_lab;

/* Parse argv, plan, run every case (or --run a mode), report, finalize; returns the exit
 * code: 0 every case passed, 1 some failed, 2 usage error (one line "error: ..."). */
int drv_main(const drv_lab *lab, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
