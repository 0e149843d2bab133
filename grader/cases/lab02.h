/* lab02.h - Lab 2's driver (tensor-parallel linear layers and MLP): what its case table
 * (grader/cases/lab02.c), its referee half (grader/referee/lab02*.c) and its player half
 * (grader/player/lab02*.c) share.
 *
 * Seeds. The API builds a layer's shards itself from a seed (tp_linear_init, tp_mlp_init),
 * so the player gets one: the *init seed*, drv_case_seed(c, LAB2_INIT, 0). What it builds
 * from it is copied out and checked bit for bit against the master, then replaced by the
 * shards of the *secret master*, drv_case_seed(c, LAB2_SECRET, run), which the referee
 * writes into this rank's slots: a player never holds a weight, input or gradient it could
 * use to compute another rank's share without communicating. Tensor ids as before.
 *
 * A linear case: arg = kind, flag (gather / input parallel), bias, backward, T, in, out,
 * steps (0 or 1: one call; 2: two backward calls accumulating into the same gradients).
 * Slots: "iseed" (IN: the init seed), "status" (OUT: lab2_status), "counters" (OUT: the
 * last call's own counters), "w_init"/"b_init" (OUT: the shard as init built it), "w"/"b"
 * (IN: the secret shard), "x" (IN: [T x xcols], ld = xcols + LAB2_PAD, the pad poisoned);
 * forward "y" (OUT [T x ycols], strided like x for the column layer, whose API allows it);
 * backward "dy" (IN) and "dx" (OUT), strided, and "dw"/"db" (INOUT: non-zero gradients
 * before the calls, then after); a second step's "x.2", "dy.2", "dx.2".
 * An MLP case: arg = backward, T, d, ffn, steps; the same for fc1 and fc2 ("w1", "b1",
 * "w2", "b2", their "_init" and "d" forms), "x"/"y" or "x"/"dy"/"dx" [T x d] (contiguous,
 * as the API wants them), a second step's forward and backward on "x.2", "dy.2", "dx.2".
 * An error case: arg = which (lab2_errors), the expected code; its tensors "x", "y", "dy",
 * "dx" as lab2_error_shapes says.
 * The scaling case: arg = T, d, ffn; the MLP's slots plus "trace" (OUT: lab2_trace).
 */
#ifndef LAB02_CASES_H
#define LAB02_CASES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver.h"         // defines: drv_case, drv_test
#include "pl_costmodel.h"   // defines: plc_op, plc_profile

/* Counter-RNG tensor ids; a second step's inputs add LAB2_STEP_ID. */
enum { LAB2_W_ID = 10, LAB2_MLP_ID = 20, LAB2_X_ID = 50, LAB2_DY_ID = 51, LAB2_GRAD0_ID = 60, LAB2_STEP_ID = 100 };
enum { LAB2_SECRET = -1, LAB2_INIT = -2 }; /* the "ranks" of drv_case_seed for shared tensors */
/* The API's codes and kinds (tp_linear.h; the player checks at compile time that they agree). */
enum { LAB2_OK = 0, LAB2_ERR_NOT_DIVISIBLE = 1, LAB2_ERR_SHAPE = 2, LAB2_ERR_NOT_IMPLEMENTED = 3 };
enum { LAB2_COLUMN = 0, LAB2_ROW = 1 };
#define LAB2_PAD 3              /* strided views (x, dy, dx, column y): ld = cols + 3 */
#define LAB2_TRACE_OPS 4096     /* operations of the scaling step's trace, at most */
const char *lab2_error_name(int code);

/* What the player did, for the referee to judge (its own report). */
typedef struct {
    int32_t init_rc, fwd_rc, call_rc; /* tp_*_init; the forward a backward case needs; the call */
    int32_t called;                   /* 1: the measured call ran                                */
    int64_t w_rows, w_cols;           /* the shard init made (the MLP: fc1's, then fc2's)        */
    int64_t w2_rows, w2_cols;
    int32_t w_data, b_data;           /* non-NULL shard and bias (every one the layer has)       */
    int32_t grads_ok;                 /* dw / db allocated and shaped like w / b                 */
    int32_t pad;
} lab2_status;

/* The master weights' bound (tp_init_bound of tp_linear.h: the player checks they agree). */
static inline float lab2_init_bound(int64_t in) { return in > 0 ? (float)(1.0 / sqrt((double)in)) : 1.0f; }

/* The scaling step's operations as this rank's trace recorded them (the player's claim). */
typedef struct {
    int64_t n;                        /* operations recorded (> LAB2_TRACE_OPS: cut)   */
    plc_op ops[LAB2_TRACE_OPS];
} lab2_trace;

/* A linear case's shapes (n ranks, this rank r). */
typedef struct {
    int kind, steps;
    bool flag, bias, bwd, col, xpar, ysplit;
    int64_t T, in, out;
    int64_t ol, il;       /* the shard w [ol x il]                 */
    int64_t r0, c0;       /* its top-left element in W [out x in]  */
    int64_t blen, b0;     /* the bias shard: length, first element */
    int64_t xcols, ycols; /* x [T x xcols] (ld + pad), y [T x ycols] */
    int64_t x0, y0;       /* their first column in the full x, y   */
    int64_t xld, yld, dyld, dxld; /* the leading dimensions of x, y, dy, dx */
} lab2_lin;
lab2_lin lab2_lin_of(const drv_case *c);

typedef struct {
    bool bwd;
    int steps;
    int64_t T, d, f, fl;
} lab2_mlp;

/* The error cases: which call, on which layer, with which tensors (rows x cols each). */
enum { LAB2_E_COLUMN_INIT, LAB2_E_ROW_INIT, LAB2_E_MLP_INIT, LAB2_E_ROW_FORWARD, LAB2_E_COLUMN_FORWARD,
       LAB2_E_COLUMN_BACKWARD, LAB2_E_ROW_BACKWARD, LAB2_E_COLUMN_BACKWARD_DY, LAB2_E_ROW_BACKWARD_DY,
       LAB2_E_MLP_FORWARD, LAB2_E_MLP_BACKWARD, LAB2_E_MLP_BACKWARD_TOKENS, LAB2_E_COUNT };
typedef struct {
    int64_t k;                        /* 8 n: divides by n                                   */
    int64_t x[2], y[2], dy[2], dx[2]; /* the tensors the call gets ({0, 0}: none)            */
} lab2_error_shapes;
lab2_error_shapes lab2_error_shapes_of(const drv_case *c);
/* A second step's slot: "x" -> "x.2" (step 1: the name itself). */
const char *lab2_step_slot(char *buf, size_t n, const char *name, int step);
lab2_mlp lab2_mlp_of(const drv_case *c); /* the MLP and scaling cases */

/* The flags. */
typedef struct {
    const char *shapes, *profile, *this_profile, *shape, *gemm_shape;
} lab2_flags;
const lab2_flags *lab2_opts(void);

/* The ideal Megatron MLP step (forward + backward) at world n on profile p, as the cost
 * model prices it; -1 if the replay fails. */
double lab2_ideal_step(const plc_profile *p, int64_t T, int64_t d, int64_t f, int n, plc_prediction *pred);

/* referee */
void lab2_init(void);
void lin_setup(drv_case *c);
void lin_check(drv_case *c);
void lin_model(drv_case *c, drv_model *m);
void mlp_setup(drv_case *c);
void mlp_check(drv_case *c);
void mlp_model(drv_case *c, drv_model *m);
void err_setup(drv_case *c);
void err_check(drv_case *c);
void err_model(drv_case *c, drv_model *m);
void scal_model(drv_case *c, drv_model *m);
void scal_setup(drv_case *c);
void scal_check(drv_case *c);
void scal_perf(drv_case *c);
void scal_refresh(drv_case *c, int run);
void scal_verify(drv_case *c, int run);
void scal_teardown(drv_case *c);
void lab2_teardown(drv_case *c);
/* referee, shared by its files */
typedef struct {                 /* a case's masters on the referee's side              */
    float *W, *b, *x, *dy;       /* linear: W [out x in], b [out], x [T x in], dy [T x out] */
    float *W1, *B1, *W2, *B2;    /* MLP: fc1 [f x d], [f]; fc2 [d x f], [d]                 */
    void *scaling;               /* lab02_scaling.c's own                                   */
} lab2_case;
const plc_profile *lab2_profile(void); /* --profile, or NULL when it could not be loaded */
float *lab2_master(int64_t rows, int64_t cols, uint64_t seed, uint64_t id, bool uniform, float bound);
void lab2_mlp_masters(const lab2_mlp *s, uint64_t seed, float **W1, float **B1, float **W2, float **B2);
/* This rank's MLP shards into the slots "w1", "b1", "w2", "b2" (declared here). */
void lab2_mlp_shard_slots(drv_case *c, const lab2_mlp *s, uint64_t seed);
/* player */
void lin_play(drv_case *c);
void mlp_play(drv_case *c);
void err_play(drv_case *c);
void scal_play(drv_case *c);
void scal_timed(drv_case *c, int which);
void lab2_release(drv_case *c);
int mode_scaling(void);
int mode_bench(void);

#endif
