/* lab02.h - what the two files of Lab 2's driver share (lab02.c: the correctness cases;
 * lab02_perf.c: the scaling case, the cost-model predictions and the modes). */
#ifndef LAB02_DRIVER_H
#define LAB02_DRIVER_H

#include "driver.h"
#include "pl_costmodel.h"
#include "tp_linear.h"

enum { W_ID = 10, MLP_ID = 20, X_ID = 50, DY_ID = 51 }; /* counter-RNG tensor ids */

extern int g_n, g_me;
extern uint64_t g_seed;
extern pl_comm *g_comm;
extern const char *g_shapes, *g_this_profile, *g_shape, *g_gemm_shape;
extern plc_profile g_prof; /* --profile (default dgx-h100) */
extern bool g_have_prof;

pl_tensor make_input(int64_t rows, int64_t cols, int64_t pad, int64_t global_cols, int64_t c0, uint64_t id);
pl_tensor make_output(int64_t rows, int64_t cols);
bool api_ok(drv_case *c, int rc, const char *what);

/* The scaling case (scaling.mlp.T.d.ffn) and the modes. */
void plan_scaling(const drv_test *t, drv_plan *p);
void scal_setup(drv_case *c);
void scal_run(drv_case *c);
void scal_check(drv_case *c);
void scal_teardown(drv_case *c);
int mode_scaling(void);
int mode_bench(void);

#endif
