/* lab04.h - Lab 4's driver (pipeline parallelism): what its case table, its referee half
 * (grader/referee/lab04*.c) and its player half (grader/player/lab04*.c) share: the flags,
 * the lab's types as the referee may see them (it never includes the lab's header: the
 * player checks at compile time that these mirror pipeline.h), the shapes the schedule
 * cases walk, the slots' layouts and the records the player leaves in them, and the pure
 * analysis both sides print (the logical clock, the closed forms, the stash bound).
 *
 * Cases and their arguments: arg[0] the schedule, arg[1] the kind of case (lab4_kind).
 */
#ifndef LAB04_CASES_H
#define LAB04_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test
#include "gpt.h"    // defines: gpt_config

/* ---- pipeline.h, mirrored ---- */
#define LAB4_MAX_STAGES 64
#define LAB4_MAX_CHUNKS 8
enum { L4_GPIPE = 0, L4_1F1B, L4_INTERLEAVED, L4_ZBH1, L4_NSCHED };
enum { L4_F = 0, L4_B, L4_W };
enum {
    L4_OK = 0,
    L4_ERR_STAGES = -1,
    L4_ERR_MICRO = -2,
    L4_ERR_DIVIDE = -3,
    L4_ERR_CHUNKS = -4,
    L4_ERR_CAPACITY = -5,
    L4_ERR_PLAN = -6,
    L4_ERR_TODO = -99
};
typedef struct {
    int32_t kind, mb, chunk;
} lab4_action;
typedef struct {
    int32_t stages, micro, chunks, layers, schedule;
    bool recompute;
} lab4_config;
const char *lab4_error_string(int rc);
int lab4_schedule_length(int k, int m, int v);
/* The partition (picotron's rule): blocks [*first, *first + count) of virtual stage
 * chunk*p + stage. */
int lab4_layers(int p, int v, int L, int stage, int chunk, int *first);

extern const char *const LAB4_SCHED[L4_NSCHED]; /* "gpipe", "1f1b", "interleaved", "zbh1" */

/* ---- flags ---- */
typedef struct {
    int T, b, C, H, F, V, L, v, slack;
    double lr;
    const char *profile;
    int steps, train_micro; /* --run train */
    double train_lr;
    const char *text, *schedule;
} lab4_flags;
const lab4_flags *lab4_opts(void);
gpt_config lab4_model(int batch); /* the flags' model, b sequences per micro-batch */
/* The real runs' shape at p stages: m micro-batches, v chunks (interleaved: --chunks,
 * fewer if the layers do not allow it). */
void lab4_run_shape(int k, int p, int *m, int *v);

/* ---- the cases ---- */
typedef enum {
    K_LISTS = 0,  /* schedule.<s>, clock.<s>: every stage's list of every shape          */
    K_CONFIG,     /* errors.config                                                       */
    K_SCHED_ERR,  /* errors.schedule                                                     */
    K_PLAN_ERR,   /* errors.plan                                                         */
    K_STEP,       /* the real runs at p = the world size: step, traffic, memory, order    */
    K_TRAFFIC,
    K_MEMORY,
    K_ORDER,
    K_RECOMPUTE,
} lab4_kind;

typedef struct {
    int p, m, v;
} lab4_shape;
/* p = 1..8, m in {1, p-1, p, 2p, 4p+1} (each once), v in {1, 2, 3} for interleaving. */
int lab4_shapes(int k, lab4_shape *out); /* at most LAB4_SHAPES */
#define LAB4_SHAPES 160
/* Where shape i's lists sit in the "lists" slot: stage s at entry lab4_list_at(k, i, s),
 * room for lab4_list_cap(k, sh) actions (exactly pp_schedule_length's where m is odd) and
 * LAB4_GUARD guard entries after them. A shape
 * whose m the interleaved schedule cannot divide has one call (stage 0, expecting
 * PP_ERR_DIVIDE); lab4_list_calls says how many calls a shape has. */
#define LAB4_GUARD 4
int lab4_list_calls(int k, lab4_shape sh);
int lab4_list_cap(int k, lab4_shape sh);
size_t lab4_list_at(int k, const lab4_shape *shapes, int i, int s);
size_t lab4_list_total(int k, const lab4_shape *shapes, int n); /* entries */
/* The index of (shape i, stage s) in the "rc" slot (int32 return codes). */
int lab4_rc_at(int k, const lab4_shape *shapes, int i, int s);

/* errors.config and errors.schedule: the bad inputs (the expected codes are the referee's). */
#define LAB4_NCONFIGS 14
extern const lab4_config LAB4_CONFIGS[LAB4_NCONFIGS];
extern const char *const LAB4_CONFIG_WHAT[LAB4_NCONFIGS];
typedef struct {
    int k, p, s, m, v, cap;
    const char *what;
} lab4_bad_call;
#define LAB4_NBAD 11
extern const lab4_bad_call LAB4_BAD[LAB4_NBAD];

/* A whole plan in a slot: int32 count[p], then stage 0's actions, stage 1's, ... */
size_t lab4_plan_bytes(int p, const int *count);
/* A stage's parameters in the "weights", "params" and "grads" slots: its chunks' blocks in
 * order (chunk 0's first block first), then the embedding on stage 0, then the head on the
 * last stage; lab4_stage_floats counts them. */
size_t lab4_stage_floats(const gpt_config *mc, const lab4_config *cfg, int s);

/* What the player says about one pp_execute (its own account: untrusted). */
enum { R_BLOCK_F = 0, R_BLOCK_B, R_BLOCK_BW, R_BLOCK_W, R_BLOCK_R, R_HEAD_F, R_HEAD_B, R_OTHER, R_KINDS };
extern const char *const LAB4_REGIONS[R_KINDS]; /* "gpt.block.F", ... */
typedef struct {
    int32_t rc;
    double loss;           /* what pp_execute returned in *loss                        */
    double stash;          /* peak of pl_mem_in_use during the call - before it (bytes)  */
    double recomputes;     /* forward rebuilds (gpt_recompute_count) during the call     */
    int32_t bad_peer;      /* a send or receive to a rank that is not a neighbour, or -1 */
    double idle;           /* idle share between the first and the last action (trace)  */
    int32_t pred_ok[2];    /* the cost model's replay of the step on the two profiles    */
    double pred_us[2], pred_bubble[2];
    int32_t norder;        /* top-level model regions in the trace (codes in "order")    */
} lab4_report;
/* errors.plan: per broken plan. */
typedef struct {
    int32_t rc, ran;
    int64_t msgs; /* messages sent and received during the call */
} lab4_plan_result;
#define LAB4_BROKEN_PLANS 4
/* The broken plans of errors.plan at p stages (the last needs two stages or more). */
int lab4_broken_plans(int p);

/* ---- the logical clock and the closed forms (pure: both sides print them) ---- */
typedef struct {
    int stages;
    const lab4_action *acts[LAB4_MAX_STAGES];
    int count[LAB4_MAX_STAGES];
} lab4_plan;
typedef struct {
    int p, v, makespan;
    int *start[LAB4_MAX_STAGES], *end[LAB4_MAX_STAGES]; /* per action of each stage */
    int busy[LAB4_MAX_STAGES], first[LAB4_MAX_STAGES], last[LAB4_MAX_STAGES];
    bool stuck;
    char why[200];
} lab4_clock;
/* Replay a plan (W actions present: F = B = W = 1 tick, else F = 1, B = 2). False, with
 * why, when some action can never start. */
bool lab4_clock_run(const lab4_plan *pl, int v, lab4_clock *c);
void lab4_clock_free(lab4_clock *c);
/* Closed forms of the clock (F = 1, B = 2; zero bubble F = B = W = 1; interleaved in chunk
 * ticks): makespan and idle ticks of every stage; the bubble = idle / makespan. */
void lab4_theory(int k, int p, int m, int v, int *makespan, int *idle);
double lab4_bubble(int k, int p, int m, int v);
void lab4_action_name(lab4_action a, int v, char *out, size_t len); /* "F(3)", "B(3,c1)" */
/* The clock as a rank x time grid of cells "F3", "B3", "W3", "." (rank 0 prints it). */
void lab4_print_grid(const lab4_plan *pl, const lab4_clock *c);
/* The stash bound of stage s for its list (bytes): the records of the micro-batches in
 * flight, with the zero-bubble gradients held for W when split; block and head records at
 * their own peaks, so that an executor may keep a pool of each. */
double lab4_stash_bound(const gpt_config *mc, const lab4_config *cfg, int s, const lab4_action *a, int n, bool split);

/* referee */
void lab4_init(void);
void lab4_setup(drv_case *c);
void lab4_teardown(drv_case *c);
void lab4_schedule_check(drv_case *c);
void lab4_clock_check(drv_case *c);
void lab4_config_check(drv_case *c);
void lab4_sched_err_check(drv_case *c);
void lab4_plan_err_check(drv_case *c);
void lab4_run_setup(drv_case *c);
void lab4_run_model(drv_case *c, drv_model *m);
void lab4_run_teardown(drv_case *c);
void lab4_step_check(drv_case *c);
void lab4_traffic_check(drv_case *c);
void lab4_memory_check(drv_case *c);
void lab4_order_check(drv_case *c);
void lab4_recompute_check(drv_case *c);
/* player */
void lab4_player_init(void);
void lab4_play_lists(drv_case *c);
void lab4_play_config(drv_case *c);
void lab4_play_sched_err(drv_case *c);
void lab4_play_plan_err(drv_case *c);
void lab4_play_run(drv_case *c);
int lab4_mode_sweep(void);
int lab4_mode_train(void);
int lab4_mode_bench(void);

#endif
