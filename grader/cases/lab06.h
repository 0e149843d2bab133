/* lab06.h - Lab 6's driver (data parallelism with gradient buckets): what its case table,
 * its referee half (grader/referee/lab06*.c) and its player half (grader/player/lab06*.c)
 * share: the flags, the model's shapes, the bucket caps, and the records the player leaves
 * in its OUT slots.
 *
 * The model is an MLP 784 -> H -> H -> 10 with GELU, biases and softmax cross-entropy,
 * trained with SGD + momentum. Parameters are registered W1, b1, W2, b2, W3, b3; backward
 * reports them ready in the order W3, b3, W2, b2, W1, b1 (each weight gradient is one GEMM,
 * then the bias), which is not reverse registration order: the rebuilt buckets show whether
 * the student followed the observed order.
 *
 * Slots of a case (all DRV_HOST: the player's model uploads and downloads them itself):
 *   "weights"  IN const  every parameter, registration order, concatenated (lab6_offset)
 *   "grad0"    IN const  accumulate.*: the gradients the model holds before ddp_init (what a
 *                        previous step left; the same on every rank)
 *   "x", "y"   IN const  this rank's rows of every (micro-)step: [steps][local][784] floats,
 *                        [steps][local] labels; never another rank's
 *   "params"   OUT       the parameters after the last step (the same layout as weights)
 *   "steps"    OUT       one lab6_step per (micro-)step: what the player counted
 *   "layout"   OUT       buckets.*, rebuild.*: lab6_layout after ddp_init / iteration 1's
 *                        ddp_backward_begin
 * Everything in "steps" and "layout" is the player's own account (from its memory, its
 * trace and its counters): docs/grader.md lists the rubric items that rest on it.
 */
#ifndef LAB06_CASES_H
#define LAB06_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test

#define LAB6_NPARAMS 6
#define LAB6_MAX_PARAMS 16 /* ddp.h's DDP_MAX_PARAMS (the player checks they agree) */
#define LAB6_IN 784
#define LAB6_CLASSES 10
#define LAB6_LR 0.1f       /* the graded model's SGD: lr and momentum */
#define LAB6_MOMENTUM 0.9f
#define LAB6_MAX_AR 32     /* all-reduces recorded per step */

enum { P_W1, P_B1, P_W2, P_B2, P_W3, P_B3 };
extern const char *const LAB6_PNAMES[LAB6_NPARAMS];
/* ddp.h's ddp_mode, in its order (the player checks). */
enum { LAB6_NAIVE = 0, LAB6_BUCKETED, LAB6_OVERLAP };
extern const char *const LAB6_MODE_NAMES[3];

/* The flags (both sides parse the same command line). */
typedef struct {
    int hidden, batch, steps;
    const char *profile;
    int epochs, train_hidden, train_batch; /* --run train */
    double lr;
} lab6_flags;
const lab6_flags *lab6_opts(void);

/* The model's parameters: shape of parameter i at hidden width h, and where it sits in the
 * concatenated vector of the "weights" and "params" slots. */
void lab6_shape(int h, int i, int *rows, int *cols, int *fan_in);
size_t lab6_numel(int h, int i);
size_t lab6_offset(int h, int i);
size_t lab6_total(int h);

/* The bucket caps of the cases: the named ones, then caps on a bucket boundary and around
 * it (boundary: 0, or bytes around a boundary: -1, +1, +0.5; 99 = exact). */
typedef struct {
    const char *name;
    double cap, first; /* MiB */
    double boundary;
} lab6_caps;
extern const lab6_caps LAB6_CAPS[9];
enum { C_DEFAULT, C_TWO, C_THREE, C_MANY };
/* The caps of case k at hidden width h, boundary caps resolved: the first bucket exactly
 * b3, the others exactly W3 + b2, or a byte less or more, in MiB. */
lab6_caps lab6_caps_of(int k, int h);

/* A case's parameters: arg[0] the ddp_mode, arg[1] the kind of run, arg[2] the caps. */
enum {
    RUN_TRAIN = 0, /* equal, calls, order, overlap: --steps synced steps                  */
    RUN_NOSYNC,    /* 2 steps of 3 micro-steps: 2 no_sync, then a synced one             */
    RUN_REBUILD,   /* rebuild.<caps>: iteration 1's layout after the ranks disagreed      */
    RUN_LAYOUT,    /* buckets.<caps>: the layout ddp_init builds                          */
    RUN_ACCUM,     /* accumulate.<mode>: 3 synced steps from non-zero gradients, never
                      zeroed (the model adds): ddp_init and the rebuild keep what they hold */
    RUN_WHEN,      /* rebuild.nosync, rebuild.once: 5 micro-steps (synced, no_sync, synced,
                      synced, synced), each rank's order changing, the layout before each  */
    RUN_LATE,      /* rebuild.late: 3 micro-steps (no_sync, synced, synced): the first
                      synced backward is iteration 0, the no_sync one before it none       */
};

/* The (micro-)steps of a case, and whether each synchronises / accumulates. */
int lab6_nsteps(int kind);
bool lab6_step_syncs(int kind, int k);
bool lab6_step_accumulates(int kind, int k);
bool lab6_step_optimizes(int kind, int k); /* an SGD step after this micro-step */
/* The order the model reports gradients in micro-step k of a case on rank r: bit l-1 set
 * when layer l reports its bias before its weight (b2 before W2: 1u << 1). */
unsigned lab6_bias_first(int kind, int k, int rank);
/* ... and that order, as parameter indices (W3, b3, W2, b2, W1, b1 when none is set). */
void lab6_ready_order(unsigned bias_first, int out[LAB6_NPARAMS]);

/* ---- the player's records (untrusted: the referee bounds-checks every field) ---- */

/* A bucket layout as the student's ddp_state holds it. */
typedef struct {
    int32_t nbuckets;
    int32_t nparams[LAB6_MAX_PARAMS];
    int32_t params[LAB6_MAX_PARAMS][LAB6_MAX_PARAMS];
    int64_t offsets[LAB6_MAX_PARAMS][LAB6_MAX_PARAMS];
    int64_t numel[LAB6_MAX_PARAMS];
    int32_t has_buf[LAB6_MAX_PARAMS];
    /* where each parameter's gradient points: elements from its bucket's buffer start, or
     * LAB6_NOT_A_VIEW when it is not inside that buffer */
    int64_t view[LAB6_MAX_PARAMS];
} lab6_layout;
#define LAB6_NOT_A_VIEW INT64_MIN

/* Where an all-reduce started, in the recorded order of one backward. */
enum { AR_IN_BEGIN = -1, AR_IN_END = LAB6_NPARAMS, AR_BETWEEN = -2 };

/* The phases of step s the referees count where they move the messages (drv_mark):
 * ddp_backward_begin, then the backward to the end of ddp_backward_end. */
#define LAB6_MARK_BEGIN(s) (2 * (s))
#define LAB6_MARK_END(s) (2 * (s) + 1)

/* One (micro-)step: the backward from the end of ddp_backward_begin to the end of
 * ddp_backward_end, counted by the player (or its referee: lab6_counted), and the layout
 * the student held in it. */
typedef struct {
    int64_t allreduce, other_colls, msgs; /* library all-reduces, other collectives, p2p messages */
    int64_t begin_colls;                  /* collectives and messages of ddp_backward_begin   */
    int32_t nar;                          /* all-reduces in the trace                          */
    int32_t ar_hook[LAB6_MAX_AR];         /* the ddp_grad_ready call (0..5) it started in, or
                                             AR_IN_END / AR_IN_BEGIN / AR_BETWEEN            */
    int64_t ar_bytes[LAB6_MAX_AR];
    double in_bwd_time, frac;             /* by time: started inside backward; the share of
                                             all-reduce time inside it (reported only)     */
    int32_t ar_off_comm;                  /* all-reduces issued inside backward (from the first
                                             ddp_grad_ready to the end of the last) on the
                                             compute stream, not pl_stream_comm()            */
    int32_t compute_waits;                /* compute ops inside backward that follow one of its
                                             all-reduces (a host sync or an event wait)      */
    double pred_overlap, pred_bwd_us;     /* the cost model's replay (reported only)        */
    int32_t pred_ok;
    lab6_layout layout;                   /* after ddp_backward_begin                        */
} lab6_step;

/* referee */
void lab6_init(void);
void lab6_setup(drv_case *c);
void lab6_teardown(drv_case *c);
void lab6_buckets_check(drv_case *c);
void lab6_equal_check(drv_case *c);
void lab6_calls_check(drv_case *c);
void lab6_order_check(drv_case *c);
void lab6_overlap_check(drv_case *c);
void lab6_nosync_check(drv_case *c);
void lab6_rebuild_check(drv_case *c);
void lab6_accum_check(drv_case *c);
void lab6_when_nosync_check(drv_case *c);
void lab6_when_once_check(drv_case *c);
void lab6_when_late_check(drv_case *c);
void lab6_model(drv_case *c, drv_model *m);
/* player */
void lab6_player_init(void);
void lab6_play_buckets(drv_case *c);
void lab6_play_train(drv_case *c);
int lab6_mode_bench(void);
int lab6_mode_train(void);

#endif
