/* lab04.h - what the files of Lab 4's driver share:
 *   lab04.c        flags, the plan of cases, the schedule, clock and error cases
 *   lab04_sched.c  the driver's own schedules, their rules, the logical clock, the grid
 *   lab04_kit.c    the stage the kit builds for pp_execute, and the serial reference
 *   lab04_run.c    the real runs: step, traffic, memory, order, recompute
 *   lab04_trace.c  what a step's trace shows: order, idle share, the cost model's replay
 *   lab04_modes.c  --run sweep, train and bench */
#ifndef LAB04_DRIVER_H
#define LAB04_DRIVER_H

#include "driver.h"       // defines: drv_* (the case runner)
#include "pipeline.h"     // defines: the lab API (pp_*)
#include "pl_costmodel.h" // defines: plc_profile, plc_prediction

/* ---- flags (lab04.c) */
extern int g_T, g_b, g_C, g_H, g_F, g_V, g_L, g_v, g_slack;
extern double g_lr;
extern uint64_t g_seed;
extern const char *SCHED_NAMES[PP_NSCHEDULES]; /* "gpipe", "1f1b", "interleaved", "zbh1" */
gpt_config model_config(int batch);            /* the flags' model, b sequences per batch */
/* The real runs' shape at p stages: m micro-batches, v chunks (interleaved: --chunks,
 * fewer if the layers do not allow it). */
void run_shape(pp_schedule_kind k, int p, int *m, int *v);
typedef struct {
    int p, m, v;
} shape;
/* Every stage's list from the student's generator (plan_free it, even on failure); false
 * with why on an error code or a write past the count. */
bool student_plan(pp_schedule_kind k, shape sh, pp_plan *pl, char *why, size_t len);

/* ---- lab04_sched.c: the driver's own schedules (derived as in-flight policies, not from
 * the formulas the student codes) and the logical clock */
int ref_schedule(pp_schedule_kind k, int p, int s, int m, int v, pp_action *out);
int ref_warmup(pp_schedule_kind k, int p, int s, int m, int v); /* forwards before the first B */
int ref_peak(pp_schedule_kind k, int p, int s, int m, int v);   /* micro-batches stashed at most */
/* Closed forms of the clock (F = 1, B = 2; zero bubble F = B = W = 1; interleaved in
 * chunk ticks): makespan and idle ticks of every stage. */
void ref_theory(pp_schedule_kind k, int p, int m, int v, int *makespan, int *idle);
double ref_bubble(pp_schedule_kind k, int p, int m, int v); /* idle / makespan */
/* Every stage's reference list, allocated (plan_free). */
void ref_plan(pp_plan *pl, pp_schedule_kind k, int p, int m, int v);
void plan_free(pp_plan *pl);

typedef struct {
    int p, v, makespan;
    int *start[PP_MAX_STAGES], *end[PP_MAX_STAGES]; /* per action of each stage */
    int busy[PP_MAX_STAGES], first[PP_MAX_STAGES], last[PP_MAX_STAGES];
    bool stuck;
    char why[200];
} pp_clock;
/* Replay a plan (W actions present: F = B = W = 1 tick, else F = 1, B = 2). False, with
 * why, when some action can never start. */
bool clock_run(const pp_plan *pl, int v, pp_clock *c);
void clock_free(pp_clock *c);
/* The rules a stage's list must keep (false with why): every action once, in range, B
 * after its F, W after its B, the warm-up length. */
bool list_rules(pp_schedule_kind k, int p, int s, int m, int v, const pp_action *a, int n, char *why, size_t len);
void action_name(pp_action a, int v, char *out, size_t len); /* "F(3)", "B(3,c1)" */
/* The clock as a rank x time grid of cells "F3", "B3", "W3", "." (rank 0 prints it). */
void print_grid(const pp_plan *pl, const pp_clock *c);

/* ---- lab04_kit.c: the stage pp_execute works on, and the serial reference */
int pp_stage_build(pp_stage *st, const pp_config *c, const gpt_config *model, pl_comm *comm, uint64_t seed, float lr);
void pp_stage_free(pp_stage *st);
/* Host tokens or targets [m][T, b] of the counter RNG (ids in [0, V)). */
void make_ids(int *host, int m, const gpt_config *mc, uint64_t seed, uint64_t id);
/* The serial model, whole, on one rank, with the global batch in one piece: loss and
 * every gradient (host copies). */
typedef struct {
    double loss;
    float **block; /* [L] gradients of each block                  */
    float *embed, *head;
} serial_grads;
void serial_reference(serial_grads *g, const gpt_config *mc, int L, int m, const int *tokens, const int *targets,
                      uint64_t seed);
void serial_free(serial_grads *g, int L);
/* Worst relative error of this stage after its step against the reference: gradient
 * buffers (holding -lr g) and parameters (p0 - lr g); the worst tensor named in worst. */
void compare_stage(const pp_stage *st, const serial_grads *g, uint64_t seed, double *grad_err, double *param_err,
                   char *worst, size_t len);

/* ---- lab04_run.c: the cases that run pp_execute; arg[0] = the schedule */
void run_case(drv_case *c);
void recompute_case(drv_case *c);
void step_check(drv_case *c);
void traffic_check(drv_case *c);
void memory_check(drv_case *c);
void order_check(drv_case *c);
void recompute_check(drv_case *c);
void plan_error_case(drv_case *c);
/* The stash a stage needs at most for its list (bytes): the records of the micro-batches
 * in flight, with the zero-bubble gradients held for W when split. */
double stash_bound(const pp_stage *st, const pp_action *a, int n, bool split);
extern plc_profile g_prof[2]; /* --profile (dgx-h100), pcie-4gpu */

/* ---- lab04_trace.c: the step recorded in the trace since the last pl_trace_clear */
/* Did the model's regions come in the order of this stage's list (false with why)? */
bool trace_order(const pp_stage *st, const pp_action *a, int n, bool split, char *why, size_t len);
/* This rank's idle share between the start of its first action and the end of its last. */
double trace_idle_share(void);
/* The cost model's replay of the step (collective; false when it cannot be replayed). */
bool predict_step(const plc_profile *p, pl_comm *world, plc_prediction *out);
/* TRACE=1: the step as a Chrome trace of its own (trace.json -> trace-1f1b.json). */
void write_trace(pp_schedule_kind k, bool recompute);
extern bool g_have_prof[2];

/* ---- lab04_modes.c */
int mode_sweep(void);
int mode_train(void);
int mode_bench(void);
extern int g_steps, g_train_micro;
extern double g_train_lr;
extern const char *g_text, *g_schedule;

#endif
