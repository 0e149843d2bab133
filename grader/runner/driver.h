/* driver.h - the case runner every lab driver plugs into, split across two processes.
 *
 * Per rank, mpirun starts a trusted *referee* (grader/referee/: links no student code).
 * The referee forks and execs the *player* (grader/player/ + the student's object + the
 * harness), which alone calls MPI and talks to the other players. The two share a control
 * socket and a memory region of named *slots* (grader/runner/wire.h):
 *
 *      referee (trusted)                         player (untrusted process)
 *      ------------------                        --------------------------
 *      setup:   slots + inputs + reference  -->  play:  the student's call(s) on the
 *                                                       slots as device buffers
 *      check, model, perf, verdicts,        <--  outputs left in the slots, the player's
 *      timing, the engine's records               own counters (labelled untrusted)
 *
 * Keys, seeds, references, tolerances, verdicts and times live only in referees: nothing
 * that runs in the player's address space decides, signs or times a result.
 *
 * A lab driver is a table, as an nccl-tests collective is four callbacks: it fills a
 * drv_lab (its name, flags, tests, modes) and each test row names its referee columns
 * (DRV_R: setup, check, model, perf, refresh, verify, teardown, interlude) and its player
 * columns (DRV_P: play, timed, release). The same table source is compiled into both binaries;
 * each keeps only its own columns (the others become NULL), so a player binary holds no
 * reference and a referee holds no call to the student.
 *
 * A case goes through
 *   referee  setup()     declare slots (drv_slot_new), fill the inputs, compute the
 *                        reference in the referee's own memory
 *   player   play()      the student's call(s); the runner syncs before and after and
 *                        reports the player's counters (drv_case.m, .wire, .mem_*)
 *   referee  interlude() only when play() pauses (drv_interlude): what the player left in
 *                        the OUT slots so far, the IN slots for the rest of play()
 *   referee  (runner)    red zones around every slot, const inputs unchanged
 *   referee  check()     compare the outputs (drv_slot_host) with the reference
 *   referee  model()     what the call should have counted (drv_model), compared here
 *   referee  perf()      only when every rank passed: drv_time_player() times the
 *                        player's timed() with fresh inputs (refresh) checked each time
 *                        (verify)
 *   player   release()   free what play() kept for timed()
 *   referee  teardown()  free what setup() allocated
 * on every rank. A failure on any rank fails the case (the lowest failing rank's message
 * explains it). Cross-rank values in the referee (drv_sum, drv_max...) travel through the
 * players' private host communicator, every contribution signed by its referee: a player
 * can stop them (a hang) but not change them (tampered).
 *
 * Protocol with the grading engine: docs/grader.md, "The driver protocol".
 */
#ifndef PL_DRIVER_H
#define PL_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl.h"
#include "pl_instrument.h" // defines: pl_metrics, pl_wire (the player's counters)

#ifdef __cplusplus
extern "C" {
#endif

/* Which side this translation unit is compiled for: -DDRV_REFEREE or -DDRV_PLAYER. */
#if defined(DRV_REFEREE) && !defined(DRV_PLAYER)
/* A player column in the referee: not NULL (the referee sees that the test plays), never
 * called (it would stop the referee with an internal error). */
void drv_player_column(void);
#define DRV_R(fn) fn
#define DRV_P(fn) ((__typeof__(&(fn)))drv_player_column)
#elif defined(DRV_PLAYER) && !defined(DRV_REFEREE)
#define DRV_R(fn) NULL
#define DRV_P(fn) fn
#else
#error "compile a driver file with exactly one of -DDRV_REFEREE and -DDRV_PLAYER"
#endif

#define DRV_NAME_MAX 160 /* case names: [A-Za-z0-9._:+=,@-], at most this long */
#define DRV_ARGS 8       /* integer parameters per case */

/* ================================================================== both sides */

/* ---- flags ---- */
typedef enum { DRV_INT, DRV_DOUBLE, DRV_STR, DRV_BYTES } drv_flag_type;

/* A flag of the lab: "--hidden 64". Numbers outside [lo, hi] are a usage error. */
typedef struct {
    const char *name; /* "--hidden"                                     */
    drv_flag_type type;
    void *value;      /* int *, double *, const char **, size_t *        */
    double lo, hi;    /* accepted range (DRV_INT, DRV_DOUBLE, DRV_BYTES) */
    const char *help;
} drv_flag;

/* The common flags, after parsing. */
typedef struct {
    size_t min_bytes, max_bytes; /* -b, -e: size sweep (K/M/G suffixes)            */
    double factor;               /* -f: size step (> 1)                            */
    int warmup, iters;           /* -w, -n: timing; -1 = the test's default        */
    int calls;                   /* --calls: most calls per timed run; 0 = automatic */
    bool quiet;                  /* -q: no table, no per-case lines on stdout      */
    const char *filter;          /* --filter GLOB                                  */
} drv_options;
const drv_options *drv_opts(void);

/* ---- cases ---- */
typedef struct drv_test drv_test;
typedef struct drv_plan drv_plan;

typedef struct {
    char name[DRV_NAME_MAX];
    char group[48];          /* the engine groups hangs by it; the rubric scores by name */
    const drv_test *test;
    int64_t arg[DRV_ARGS];   /* the test's parameters, as its plan() set them           */
} drv_instance;

typedef enum { DRV_PASS = 0, DRV_WRONG, DRV_ERROR, DRV_FORBIDDEN } drv_verdict;

/* A case being run, on either side. Fields marked (R) are the referee's only. */
typedef struct drv_case {
    const drv_instance *inst;
    const char *name;
    const int64_t *arg;       /* inst->arg                                                */
    void *state;              /* this side's own: drv_state(); freed by the runner        */
    int rank, world;
    bool ran;                 /* (R) the player ran play(): setup passed on every rank    */
    bool players_word;        /* (R) its traffic figures come from the player's own records
                                 (drv_traffic_from_player), not from what the referees moved */
    /* (R) What the player reported about play(): its own counters, from its own memory.
     * A hostile player can fake these; docs/grader.md lists the rubric items they feed. */
    pl_metrics m;
    pl_wire wire;
    int64_t mem_before, mem_after; /* pl_mem_in_use() before play(), after release() */
    int64_t mem_peak;              /* pl_mem_peak() during play()                     */
    int timing;               /* (R) the timed call (`which`) of the run that refresh and
                                 verify are called for (drv_time_players)                 */
    int batch_max;            /* (R) input and output sets the slots hold (drv_batch_sets) */
    int batch;                /* calls in the current timed run, each on its own set: the
                                 referee's refresh and verify fill and check `batch` sets;
                                 the player's timed() is called `batch` times             */
    int batch_index;          /* (P) the set this call of timed() uses, 0..batch-1        */
    /* ---- the runner's */
    drv_verdict verdict;
    char msg[480];
    char note[480];
    void *fields;             /* (R) the result record under construction               */
    void *slots;              /* the case's slot table                                  */
} drv_case;

/* The case's own state on this side: `size` zeroed bytes, kept in c->state and freed by
 * the runner after teardown() / release() (which free only what it points to). */
void *drv_state(drv_case *c, size_t size);

/* ---- slots: the case's shared buffers ---- */
enum {
    DRV_IN = 1,      /* the referee fills it; the player reads it                         */
    DRV_OUT = 2,     /* the player writes it; it starts poisoned (a NaN pattern)           */
    DRV_INOUT = 3,
    DRV_CONST = 4,   /* with DRV_IN: the player must not change it (checked after play)    */
    DRV_ZEROED = 8,  /* with DRV_OUT: starts zeroed instead of poisoned                    */
    DRV_HOST = 16,   /* a host array on every device: the player's drv_slot() is the shared
                        region itself, never copied to or from a device buffer (schedules,
                        plans, records the player's own code writes, inputs the lab's model
                        uploads itself)                                                      */
};

/* The size in bytes of the slot `name` (either side); 0 if there is none. */
size_t drv_slot_bytes(const drv_case *c, const char *name);

/* What the player counted around one phase of a multi-step play() (drv_measure_slot), so
 * that the referee can judge that phase alone (drv_use_counters): the player's own
 * accounting, as untrusted as drv_case.m. */
typedef struct {
    pl_metrics m;              /* the phase's counters (mem_peak: the peak since play() began) */
    pl_wire wire;              /* what went to the comm backend during the phase               */
    int64_t mem_before, mem_after; /* pl_mem_in_use() before and after the phase               */
    uint32_t measured;         /* 1 once drv_measure_slot wrote it; 0: the phase never ran     */
    uint32_t pad;
} drv_counters;

/* Phases of play() that are not a slot's: the player marks each one's bounds (drv_mark) and,
 * where the referees move the messages (the cpu device), its referee counts what it moved in
 * between (drv_moved_in). drv_measure_slot marks its slot's phase the same way. */
#define DRV_PHASES 128
typedef struct {
    pl_metrics m;                     /* the traffic fields: point-to-point, collectives by kind */
    pl_wire wire;
    uint64_t coll_bytes[PL_OP_COUNT]; /* the collectives' S, by kind                         */
} drv_moved;

/* Traffic as a model states it or a player counted it (drv_check_traffic): per kind of
 * library collective, and the point-to-point messages sent. Doubles, so that a player's
 * record of it in a slot shows a NaN (never written) as such. */
typedef struct {
    double calls[PL_OP_COUNT]; /* library collectives by kind                          */
    double bytes;              /* their S, summed                                      */
    double msgs, msg_bytes;    /* point-to-point messages sent, and their bytes         */
} drv_traffic;

/* What moved on one communicator during a phase, as the referees counted it
 * (drv_moved_by_comm). calls[PL_OP_BARRIER] counts barriers. */
typedef struct {
    int world;         /* 1: the world communicator                                    */
    int label;         /* the name the kit gave it (drv_name_comm), -1 none: a claim   */
    uint64_t members;  /* its world ranks, bit r (worlds of up to 64 ranks; else 0)     */
    drv_traffic t;
} drv_comm_moved;

/* What a test may look at, per side, is in the sections below. */

/* ---- the lab ---- */
typedef struct {
    /* What run() should have done on this rank, for the runner to compare with the
     * player's counters (all optional; zero-initialised = nothing expected). */
    bool no_collectives;          /* any library collective: forbidden (Lab 1)            */
    bool no_p2p;                  /* any point-to-point message: wrong                    */
    const char *instead;          /* what the lab moves data with, for those two messages
                                   * (NULL: pl_send/pl_recv for no_collectives, the library
                                   * collectives for no_p2p) */
    bool exact_collectives;       /* exactly colls[kind] calls of each kind, S = coll_bytes */
    int colls[PL_OP_COUNT];
    double coll_bytes;
    double gemm_flops;            /* exact GEMM flops on this rank when > 0               */
    bool exact_p2p;               /* exactly p2p_bytes sent in p2p_msgs messages          */
    double p2p_bytes, p2p_msgs;
    /* The optimum, reported as ratios (1.0 = optimal) that the rubric's perf rules read. */
    double bytes_optimal;         /* p2p bytes this rank sends at the optimum: a lower
                                     bound, so none at all, or fewer, fails the case    */
    int bytes_agg;                /* DRV_BYTES_AVG or DRV_BYTES_MAX over ranks          */
    double msgs_optimal;          /* messages of the busiest rank at the optimum          */
    bool no_leak;                 /* report `freed` (and `leak`): in use after release() = before play() */
} drv_model;
enum { DRV_BYTES_AVG = 0, DRV_BYTES_MAX = 1 };

struct drv_test {
    const char *name;  /* the case name (or the prefix its plan() uses)             */
    const char *group; /* default group of its cases                                 */
    /* Add this test's cases (drv_plan_add); NULL: one case named `name`. Runs on both
     * sides, before any student code, so it depends on flags and the world only. */
    void (*plan)(const drv_test *t, drv_plan *p);
    /* referee columns (DRV_R) */
    void (*setup)(drv_case *c);
    void (*check)(drv_case *c);
    void (*model)(drv_case *c, drv_model *m);
    void (*perf)(drv_case *c);
    void (*refresh)(drv_case *c, int run); /* fresh inputs for timed run `run`          */
    void (*verify)(drv_case *c, int run);  /* check timed run `run`'s outputs           */
    void (*teardown)(drv_case *c);
    /* play() paused in drv_interlude(c, which): read the OUT slots it wrote so far, write
     * IN slots for the rest of it (what only the referee may do in between: files) */
    void (*interlude)(drv_case *c, int which);
    /* player columns (DRV_P) */
    void (*play)(drv_case *c);             /* the measured student call(s)              */
    void (*timed)(drv_case *c, int which); /* what perf times: which = 0 the student's  */
                                           /* call, 1 the library's, ... (test-defined) */
    void (*release)(drv_case *c);          /* free what play() kept                     */
    const void *data;                      /* the row's own data                        */
};

typedef struct {
    const char *name;  /* "bench", "scaling", "predict", "sweep", "train", "chat"     */
    const char *help;
    int (*fn)(void);   /* player side (DRV_P): modes run the student's program alone  */
    const char *np;    /* world sizes `make lab-N RUN=NAME` uses without NP=          */
    const char *post;  /* a script run after every world size (plots), or NULL        */
} drv_mode;

typedef struct {
    const char *name;             /* "01-collectives": must equal the rubric's lab line */
    const char *title;
    const drv_flag *flags;        /* ends with a {NULL} row; may be NULL                */
    const drv_test *tests;        /* ends with a {NULL} row                             */
    const drv_mode *modes;        /* ends with a {NULL} row; may be NULL                */
    const drv_options *defaults;  /* NULL: sizes 0..64M by x2, tests' own iterations    */
    /* referee: after the flags, before planning: validate them (pl_usage_error). */
    void (*init)(void);
    /* player: after the flags, before the first case or mode (load data, ...). */
    void (*player_init)(void);
    /* referee: after the last case, before the summary line (tables). */
    void (*finish)(void);
    /* referee: a case has finished, on every rank, with its final verdict. */
    void (*after_case)(const drv_case *c);
    /* The player keeps MPI of its own on the cpu device too (its traffic is then its own
     * word): a lab whose student code needs what the referees' transport does not move
     * (Lab 9's symmetric memory). */
    bool player_mpi;
} drv_lab;

/* Add a case of test t named by the format; returns it so that plan() can set its args
 * (and its group, which defaults to t->group). */
drv_instance *drv_plan_add(drv_plan *p, const drv_test *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The size sweep of -b/-e/-f in elements of 4 bytes: 0 and 1 element first, then
 * min..max by the factor, the largest always included. Returns how many (<= cap). */
size_t drv_sizes(size_t *out, size_t cap);
/* "64M", "1K", "4096" -> bytes; false on a malformed string or more than 1 TiB. */
bool drv_parse_bytes(const char *s, size_t *out);
/* Iterations for a message of `bytes` (many for small messages, few for large). */
int drv_iters_for(size_t bytes);

/* A line on stdout from rank 0 (tables, reports); nothing with -q. */
void drv_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, even with -q (modes that exist to print). */
void drv_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse argv, plan, run the cases (or a mode), report; returns the exit code: 0 every
 * case passed, 1 some failed, 2 usage error (one line "error: ..."). */
int drv_main(const drv_lab *lab, int argc, char **argv);

/* ================================================================== referee side (DRV_R) */
#ifdef DRV_REFEREE

/* A slot of `bytes` bytes (a multiple of nothing in particular; 0 is allowed) with the
 * DRV_IN/OUT/INOUT/CONST/ZEROED flags; returns its host address, to fill (IN) or read
 * after play (OUT). Names: 1..31 of [A-Za-z0-9_.]. Only in setup(). */
void *drv_slot_new(drv_case *c, const char *name, size_t bytes, unsigned flags);
/* The host address of a slot (what the player left there after play / a timed run). */
void *drv_slot_host(drv_case *c, const char *name);
/* Poison (or zero) the OUT slots again (the runner does it before every timed run). */
void drv_slots_repoison(drv_case *c);
/* Fill `bytes` bytes with the poison (the quiet NaN 0x7FC0DEAD, word by word): the parts of
 * an INOUT slot the player must write. */
void drv_poison_host(void *p, size_t bytes);
/* The first byte of slot `name` at or after `from` that no longer holds the poison (as
 * drv_poison_host lays it from the slot's start), as an offset from `from`; -1 when all of
 * them still do. A test whose slots hold sets (drv_batch_sets) checks with it that play()'s
 * one call on set 0 left the other sets alone. */
int64_t drv_slot_unpoisoned(drv_case *c, const char *name, size_t from);
/* In init(): one argument for the player's command line, after the user's (the player
 * parses it with the lab's flags): what the referee decided before its player exists, e.g.
 * the path of a data file it wrote or resolved. At most 8. */
void drv_player_arg(const char *arg);
/* A random value the players cannot predict (graded) or a fixed sequence (by hand): which
 * elements a spot check looks at. */
uint64_t drv_unpredictable(void);

/* The first call explains the case; a later call of a stronger kind (forbidden > error >
 * wrong) replaces it. */
void drv_fail(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void drv_forbid(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void drv_error(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void drv_note(drv_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool drv_failed(const drv_case *c); /* this rank's verdict so far */
/* A numeric field of the result (rank 0's value is reported: reduce first). */
void drv_num(drv_case *c, const char *key, double value);
/* A text field of the result (rank 0's is reported), e.g. why a case broke a rule. */
void drv_str(drv_case *c, const char *key, const char *text);

/* Cross-rank values: every rank's referee must call them in the same order. */
double drv_sum(double v);
double drv_max(double v);
double drv_min(double v);
void drv_allgather_u64(uint64_t v, uint64_t *out); /* out[world] */
/* Every rank's `bytes` bytes into out[world * bytes]. */
void drv_allgather(const void *mine, size_t bytes, void *out);

/* ---- checks (checks.c): every one reduces over the ranks (every referee makes the same
 * checks in the same order) and fails the case in one message style, e.g.
 *   "WHAT: relative error 0.031 > tolerance 1e-05 (worst element here [3, 7]: got 1.5, expected 1.25)".
 * A check that returns bool returns the same on every rank: branch on it, never on
 * drv_failed(). */

/* rc == want on every rank? If not, fails the case on every rank: this rank's code and its
 * name against the expected one, or "WHAT failed on another rank". drv_all_ok: want = 0. */
bool drv_check_code(drv_case *c, int rc, int want, const char *what, const char *(*name)(int));
bool drv_all_ok(drv_case *c, int rc, const char *what, const char *(*name)(int));
/* ok on every rank? If not, fails the case on every rank with the message (each rank's
 * own values: say what the ranks at fault did, or that one did). */
bool drv_check_all(drv_case *c, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The tolerance of every float comparison against a float64 reference (the referee's:
 * 1e-5, or 5e-3 when the user ran the cuda device in TF32 with PL_TF32=1), and why. */
double drv_tolerance(void);
const char *drv_tolerance_why(void);

/* Compare n floats the player left (a slot's host address) with the expected ones, on
 * every rank: exact = bit for bit (the first differing element named), else relative
 * Frobenius error against drv_tolerance() (the worst element named). NaN fails ("never
 * written?"). Returns the worst error over ranks (also rel_err), or the elements that
 * differ over ranks when exact. */
double drv_check_floats(drv_case *c, const char *what, const float *got, const float *expected, size_t n,
                        bool exact);
/* The same for a rows x cols matrix stored with leading dimension ld (>= cols) in got;
 * expected is dense; elements are named [row, col]. Elements between cols and ld must keep
 * the poison (an OUT slot) or their input values: the caller checks those itself if it
 * cares. */
double drv_check_strided(drv_case *c, const char *what, const float *got, size_t ld, const float *expected,
                         size_t rows, size_t cols, bool exact);
/* ... and that the elements between cols and ld of such an OUT slot keep their poison (a
 * call writes its [rows x cols] view and nothing beside it). Returns how many do not. */
double drv_check_pad(drv_case *c, const char *what, const float *got, size_t ld, size_t rows, size_t cols);
/* n floats against a float64 reference, at the given tolerance (drv_tolerance() or one the
 * lab derives): the relative Frobenius error, the worst element named. */
double drv_check_tensor(drv_case *c, const char *what, const float *got, const double *want, size_t n,
                        double tolerance);
/* The same for a relative error computed by the test itself (reduced over ranks here). */
double drv_check_error(drv_case *c, const char *what, double rel_err, double tolerance);
/* The relative Frobenius error of a float result against a reference: ||got - want|| /
 * ||want|| (the absolute norm when want is all zeros; infinite at a NaN or inf in got). */
double drv_rel_err(const float *got, const double *want, size_t n);
double drv_rel_err_f(const float *got, const float *want, size_t n);

/* Per-step values of a training run (losses, gradient norms; the same on every rank or
 * this rank's own) against the reference run's: |got - want| / |want| per step (infinite
 * at a non-finite value), step 1 against tol_first and the later steps against tol_later
 * (an optimizer's steps amplify rounding: the lab derives how much), the worst step of
 * each named as number first + s. Returns the worst error over ranks. */
double drv_check_steps(drv_case *c, const char *what, const double *got, const double *want, int steps, int first,
                       double tol_first, double tol_later);

/* AdamW at the rounding level (the reference's optimizer steps of Labs 7 and 8). AdamW
 * divides each gradient by its own RMS, so an element whose gradient is float32 rounding
 * (exactly zero in exact arithmetic, e.g. a key bias) steps +-lr on the sign of that
 * rounding, and one such step is far above any relative tolerance. The reference marks an
 * element whose bias-corrected RMS sqrt(v/(1 - beta2^t)) is under drv_adam_firm(the sum of
 * those v-hats over the model, their count) at any step; a marked element is left out of
 * the relative error and held to drv_adam_reach (4 lr per step: no AdamW step moves an
 * element farther than about lr). drv_check_adam_reach judges the count of marked
 * elements past that reach (or not finite), summed over the ranks. */
double drv_adam_firm(double vhat_sum, double count);
double drv_adam_reach(double lr, int steps);
bool drv_check_adam_reach(drv_case *c, const char *what, double far, double lr, int steps);

/* Traffic against a model. Each fails only the ranks whose own count is off (by more than
 * half a unit: counts and bytes are whole numbers; a NaN is off), the lowest of them
 * explaining the case, and returns true when no rank's is.
 *   drv_check_count   one number: "WHAT: GOT, expected WANT"
 *   drv_check_peers   bytes this rank sent to each other rank (got[world], want[world])
 *   drv_check_traffic calls per kind, their S, messages and their bytes */
bool drv_check_count(drv_case *c, const char *what, double got, double want);
bool drv_check_peers(drv_case *c, const char *what, const double *got, const double *want);
bool drv_check_traffic(drv_case *c, const char *what, const drv_traffic *got, const drv_traffic *want);
bool drv_traffic_differs(const drv_traffic *got, const drv_traffic *want);
drv_traffic drv_traffic_of(const pl_metrics *m); /* a player's counters as traffic */
/* The player's two counts of its traffic (its counters, and what reached `backend`) must
 * agree: when `differs` on any rank, the case is forbidden. Returns true when they agree. */
bool drv_check_counted(drv_case *c, bool differs, const char *backend);

/* The seed of rank r's inputs of case c (run `run` of a perf loop, 0 for the case itself):
 * derived from the run's key in a graded run (no player can know it), from --seed, the
 * rank and the case name by hand (reproducible). Any referee can compute any rank's. */
uint64_t drv_case_seed(const drv_case *c, int r, int run);
/* True when the grading engine runs this driver. */
bool drv_graded(void);

/* An OUT slot (zeroed) for the counters of one phase of play() (drv_measure_slot). Only in
 * setup(). */
void drv_counters_slot(drv_case *c, const char *name);
/* The counters the player left there, copied out (measured = 0: the phase did not run). */
drv_counters drv_counters_of(drv_case *c, const char *name);
/* Judge that phase instead of the whole play(): c->m and c->wire become its counters, which
 * model() and the runner's traffic checks then read. False (c unchanged) when the player
 * did not measure it. */
bool drv_use_counters(drv_case *c, const char *name);
/* The case's traffic figures come from records the player wrote (not c->m, c->wire or
 * drv_counters_of, which the referees count where they move the messages): the report says
 * they are the student's own word. */
void drv_traffic_from_player(drv_case *c);
/* True where the referees move the messages: *out is then what they moved during the phase
 * `phase` (0..DRV_PHASES-1) the player marked (drv_mark), all zero when it has no pair of
 * marks; false (zeroed) elsewhere, where only the player's records say. drv_moved_apply
 * writes those counts over the traffic fields of a player's record. */
bool drv_moved_in(int phase, drv_moved *out);
void drv_moved_apply(const drv_moved *d, pl_metrics *m, pl_wire *w);
/* The same phase communicator by communicator: every one that carried anything during it
 * (at most max); -1 where the referees do not move the messages. */
int drv_moved_by_comm(int phase, drv_comm_moved *out, int max);
/* The backends the player said it runs when it started (its claim: the referee cannot look
 * at the device). Known from the first case on, not in init() or plan(). */
void drv_player_backends(pl_device_kind *device, pl_comm_kind *comm);

/* Time the player's timed(c, which): `warmup` untimed runs, then `iters` timed ones (the
 * -w/-n flags win). Before each run refresh(c, k) writes fresh inputs (required: a cached
 * result must not be timed), after each verify(c, k) checks its outputs (a wrong one fails
 * the case: "timed run k: ..."). A run's time is from the referee's go to the player's
 * done (the player starts with a barrier of the ranks), the slowest rank's; statistics
 * over runs in microseconds, the same on every rank. */
pl_timing drv_time_player(drv_case *c, int which, int warmup, int iters);
/* The same for several calls compared with each other (the student's and the library's):
 * their runs interleaved, round k in order and round k + 1 in reverse, so that load on a
 * shared machine falls on each alike; out[i] is which[i]'s. Runs are numbered 1, 2, ...
 * across the calls (refresh and verify see each number once). */
void drv_time_players(drv_case *c, const int *which, int nwhich, int warmup, int iters, pl_timing *out);
/* In setup(): the test's slots hold `sets` independent input and output sets for timed
 * runs (set 0 is play()'s). A timed run then makes `batch` calls back to back between one
 * go and one done, call k on set k, and its time is divided by `batch`: the control
 * socket's round trip and the barrier are paid once per run, not per call. The runner picks
 * `batch` (the same on every rank) so that a run lasts about DRV_BATCH_RUN_US, from a probe
 * run of each call; refresh(c, run) must then fill and verify(c, run) check sets
 * 0..c->batch-1, each with inputs of its own (drv_batch_run numbers them). */
#define DRV_BATCH_RUN_US 1000.0
void drv_batch_sets(drv_case *c, int sets);
/* The seed number of set k of timed run `run` (for drv_case_seed): distinct for every
 * (run, set), never 0 (play()'s). */
int drv_batch_run(const drv_case *c, int run, int k);
/* "; oversubscribed: N ranks on C cores of this host" where this host's ranks outnumber the
 * cores the referee may run on, "" otherwise: for the note of a timed figure. */
const char *drv_oversubscribed(void);
/* Whether every rank of the run is on this host, as the launcher says (true when it says
 * nothing) and as the player's own MPI found it: cases that need one node (loads through
 * peer pointers) say so where not. */
bool drv_one_host(void);

#endif /* DRV_REFEREE */

/* ================================================================== player side (DRV_P) */
#ifdef DRV_PLAYER

/* The device address of a slot: host memory on the cpu device (the shared region itself),
 * a device buffer on cuda (the runner uploads IN slots before play/timed and downloads
 * OUT slots after). A DRV_HOST slot is the shared region on every device. */
void *drv_slot(drv_case *c, const char *name);
float *drv_slot_f(drv_case *c, const char *name); /* the same, as floats */

/* Measure fn(arg) as the runner measures play(): sync, reset the counters, call, sync,
 * read the counters into *m (the player's own accounting, for tests with phases). */
void drv_measure(void (*fn)(void *), void *arg, pl_metrics *m);
/* Count fn(arg) as one phase of play() into the OUT slot `name` (drv_counters_slot): the
 * differences of the counters around it, without resetting what the runner counts around
 * the whole play(). */
void drv_measure_slot(drv_case *c, const char *name, void (*fn)(void *), void *arg);
/* The bounds of phase `phase` (0..DRV_PHASES-1) of play(), for the referee's drv_moved_in:
 * each phase begins once and ends once per case, in that order (else the run is tampered);
 * nothing where the referees do not move the messages. */
void drv_mark(int phase, bool end);
/* Name communicator c for the referee's counting by communicator (drv_moved_by_comm): a
 * label in 0..63 it reports beside the members it knows itself. */
void drv_name_comm(pl_comm *c, int label);
/* What a framework does once a call returns: read the call's outputs on the stream it was
 * given, without waiting for the device (its next kernel on that stream). Each slot named
 * (a NULL-terminated list) is read by work queued on s; the runner puts what that work read
 * back into the slot after play() (and before an interlude), so the referee judges the
 * outputs as the caller's stream saw them. On the cpu device's deferred streams (graded
 * runs) work the call left on another stream that s does not wait for has not run yet, and
 * the case fails as it would on a GPU; on eager streams and on cuda it reads nothing. Only
 * in play(); elsewhere it does nothing. */
void drv_consume(drv_case *c, pl_stream *s, ...);
/* The stream a lab whose API takes one gives the calls of case c on this rank: the comm
 * stream on some ranks, the compute stream (the default, NULL) on the others, chosen by
 * rank and case so that every case with two ranks or more sees both. Work a call issues on
 * the default stream instead of the one it was given, and work it leaves on the comm
 * stream without making the given one wait, are then both missing when drv_consume reads. */
pl_stream *drv_stream(const drv_case *c);
/* True when every rank's player passes true: a host reduction that no counter sees, so
 * that the ranks stop a multi-step play() together when a step failed on one of them
 * (control flow only: verdicts are the referee's). */
bool drv_everyone(bool mine);
/* Pause play() for the referee's interlude(c, which): the OUT slots as written so far go
 * to the referee, which may read them and write IN slots; returns once it is done (the IN
 * slots as it left them). Every rank's play() calls it the same number of times: the
 * referees' interludes exchange values through the players. */
void drv_interlude(drv_case *c, int which);

/* Cross-rank values of the players: host reductions that no counter sees, for the modes'
 * results and for control flow (never a verdict). Every rank's player calls them in the
 * same order. */
double drv_sum(double v);
double drv_max(double v);
double drv_min(double v);
/* A training mode's text as bytes (at most 4 MiB): `path` (--text) when given, else a
 * licence Debian ships, else `handout`; says which on stdout, and is a usage error when
 * none can be read or it holds under 1000 bytes. */
unsigned char *drv_read_text(const char *path, const char *handout, size_t *n);

#endif /* DRV_PLAYER */

#ifdef __cplusplus
}
#endif

#endif
