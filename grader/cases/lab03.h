/* lab03.h - Lab 3's driver (a Megatron tensor-parallel GPT-2 block, sequence parallelism):
 * what its case table (grader/cases/lab03.c), its referee half (grader/referee/lab03*.c)
 * and its player half (grader/player/lab03.c) share.
 *
 * Seeds. mg_params_init builds a rank's shards from a seed, so the player gets one, the
 * *init seed* drv_case_seed(c, LAB3_INIT, 0): what init builds is copied out ("init") and
 * checked bit for bit, then replaced by this rank's shards of a *secret master*
 * (drv_case_seed(c, LAB3_SECRET, run), slot "p") in mg_params' own layout (lab3_layout).
 * Inputs (x, dy, the training target) are this rank's rows of secret tensors.
 *
 * Slots of the block cases (forward.*, backward.*, comm.*; arg[0] = sp):
 *   "iseed" IN, "status" OUT (lab3_status), "init" OUT and "p" IN (one block's shards),
 *   "x" IN [Nl x C], "y" OUT; backward and comm also "dy" IN, "dx" OUT and "g" INOUT (the
 *   gradients before and after, mg_params' layout). backward runs two steps (forward and
 *   backward on "x", "dy", then on "x.2", "dy.2" into "dx.2") from non-zero gradients
 *   (with sp, the replicated tensors' on rank 0 only: the partial sums mg_sync_sp_grads
 *   adds up), then syncs. comm: "cf", "cb", "cs", the player's counters of the forward,
 *   the backward and mg_sync_sp_grads; its timed runs add "comm_s" (OUT: the seconds the
 *   run spent in collectives, the player's clock).
 * config.errors: "rc" OUT (mg_config_check of lab3_error_configs, in order).
 * memory.sp: "m0", "m1" (the counters of mg_acts_alloc without and with sp).
 * train.*: "iseed", "status", "init" and "p" (L blocks), "x", "target" IN [Nl x C], "y"
 *   OUT, "p_new" OUT (L blocks after one SGD step of LAB3_LR).
 */
#ifndef LAB03_CASES_H
#define LAB03_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test

enum { LAB3_SECRET = -1, LAB3_INIT = -2 }; /* the "ranks" of drv_case_seed for shared tensors */
/* The API's codes and master tensors (megatron.h; the player checks that they agree). */
enum { LAB3_OK = 0, LAB3_ERR_HEADS = 1, LAB3_ERR_SEQ = 2, LAB3_ERR_SHAPE = 3 };
enum { LAB3_LN1_W, LAB3_LN1_B, LAB3_QKV_W, LAB3_QKV_B, LAB3_PROJ_W, LAB3_PROJ_B,
       LAB3_LN2_W, LAB3_LN2_B, LAB3_FC1_W, LAB3_FC1_B, LAB3_FC2_W, LAB3_FC2_B, LAB3_NTENSORS };
#define LAB3_LR 0.5f         /* the training case's SGD step */
#define LAB3_X_ID 7          /* tensor ids of the block cases' x, dy; the stack's x, target */
#define LAB3_DY_ID 8
#define LAB3_STACK_X_ID 9
#define LAB3_TARGET_ID 10
#define LAB3_STEP_ID 100     /* a second step's inputs: the first's ids + this */
#define LAB3_GRAD0_ID 3000   /* backward's initial gradients: + the tensor      */
#define LAB3_MAX_ERROR_CONFIGS 16
#define LAB3_WHAT_MAX 120

extern const char *const LAB3_TNAME[LAB3_NTENSORS]; /* "ln1.w", ... */

typedef struct {
    int T, B, C, H, F, L, iters; /* --seq --batch --hidden --heads --ffn --layers --iters */
} lab3_flags;
const lab3_flags *lab3_opts(void);

/* An mg_config without its communicator. */
typedef struct {
    int seq, batch, hidden, heads, ffn;
    bool sp;
} lab3_cfg;
lab3_cfg lab3_config(bool sp, int T);
int lab3_seq_for(bool sp, int tp);        /* T, rounded up to a multiple of tp with sp */
int lab3_local_rows(const lab3_cfg *k, int tp); /* N, or N / tp with sp           */
/* The configurations config.errors gives mg_config_check at world size tp; how many. */
int lab3_error_configs(int tp, lab3_cfg *out, int *want, char (*what)[LAB3_WHAT_MAX]);

/* Where this rank's shard of master tensor w sits in mg_params' allocation (the order of
 * mg_params_alloc): `off` floats into it, a [rows x cols] block at (r0, c0) of the master
 * [R x K]. Returns the floats of the allocation. */
typedef struct {
    int64_t off, rows, cols, r0, c0, R, K;
} lab3_piece;
size_t lab3_layout(int C, int F, int tp, int rank, lab3_piece out[LAB3_NTENSORS]);

/* What the player did (its own report). */
typedef struct {
    int32_t config_rc; /* mg_config_check of the case's config     */
    int32_t called;    /* 1: the measured calls ran                */
} lab3_status;

/* referee */
void lab3_init(void);
void lab3_finish(void);
void lab3_errors_setup(drv_case *c);
void lab3_errors_check(drv_case *c);
void lab3_block_setup(drv_case *c);
void lab3_forward_check(drv_case *c);
void lab3_backward_check(drv_case *c);
void lab3_comm_check(drv_case *c);
void lab3_comm_model(drv_case *c, drv_model *m);
void lab3_leak_model(drv_case *c, drv_model *m);
void lab3_comm_perf(drv_case *c);
void lab3_comm_refresh(drv_case *c, int run);
void lab3_comm_verify(drv_case *c, int run);
void lab3_memory_setup(drv_case *c);
void lab3_memory_check(drv_case *c);
void lab3_train_setup(drv_case *c);
void lab3_train_check(drv_case *c);
void lab3_train_teardown(drv_case *c);
void lab3_teardown(drv_case *c);
/* player */
void lab3_errors_play(drv_case *c);
void lab3_block_play(drv_case *c);
void lab3_block_timed(drv_case *c, int which);
void lab3_memory_play(drv_case *c);
void lab3_train_play(drv_case *c);
void lab3_release(drv_case *c);

#endif
