/* lab06.h - what the files of Lab 6's driver share: the model (an MLP 784 -> H -> H -> 10
 * with GELU, biases and softmax cross-entropy, SGD + momentum; lab06_model.c), the data, the
 * cost-model profile, and the modes (lab06_modes.c). lab06.c holds the grading cases. */
#ifndef LAB06_DRIVER_H
#define LAB06_DRIVER_H

#include "ddp.h"          // defines: the lab API (ddp_param, ddp_state, ...)
#include "driver.h"       // defines: drv_* (the case runner)
#include "ds_fashion.h"   // defines: ds_dataset, ds_synthetic, ds_fashion_load
#include "pl_costmodel.h" // defines: plc_profile, plc_prediction

/* Parameters are registered W1, b1, W2, b2, W3, b3; backward reports them ready in the order
 * W3, b3, W2, b2, W1, b1 (each weight gradient is one GEMM, then the bias), which is not
 * reverse registration order: the rebuilt buckets show whether the student followed the
 * observed order. */
enum { P_W1, P_B1, P_W2, P_B2, P_W3, P_B3, NPARAMS };
extern const char *PNAMES[NPARAMS];

typedef struct {
    int in, hidden, classes, max_rows;
    ddp_param p[NPARAMS];
    float *grad_own[NPARAMS]; /* the model's gradient storage (DDP may point elsewhere) */
    float *mom[NPARAMS];
    float *x, *a1, *h1, *a2, *h2, *logits, *probs, *losses, *dlogits, *dh2, *dh1;
    int *labels;
    float lr, momentum;
    int swap_w2_b2_hooks; /* the rebuild case: this rank reports b2 before W2 */
} mlp;

void mlp_init(mlp *m, int in, int hidden, int classes, int max_rows, uint64_t seed);
void mlp_free(mlp *m);
void mlp_reset_grads(mlp *m);                                 /* after ddp_free */
double mlp_forward(mlp *m, const float *x, const int *y, int rows); /* mean loss */
/* Backward of the last forward, reporting each gradient to d (or NULL); accumulate adds. */
void mlp_backward(mlp *m, ddp_state *d, int rows, bool accumulate);
void mlp_step(mlp *m);
void param_hash(mlp *m, double out[2]);  /* every parameter's bits, as two exact doubles */
double param_rel_err(mlp *a, mlp *b);    /* relative Frobenius error over all parameters */

extern int g_n, g_me, g_hidden, g_batch, g_steps;
extern uint64_t g_seed;
extern ds_dataset g_data;   /* synthetic: 28 x 28 inputs, 10 classes, from the counter RNG */
extern pl_comm *g_comm;
extern plc_profile g_prof;  /* --profile (default dgx-h100) */
extern bool g_have_prof;

/* The recorded events since `first` replayed on the profile (collective); false when there
 * is no profile or the replay fails. */
bool predict(size_t first, plc_prediction *pp);
/* Rows of the global batch of (step, micro) that rank r holds, and where they are. */
void batch_rows(int step, int micro, int rank, int world, int *rows, int *first);
void load_rows(int first, float **x, int **y);
/* One step's trace: all-reduces in order, their sizes, how many started inside the
 * backward region and the fraction of their time inside it. */
void scan_trace(int *nar, size_t *sizes, int cap, double *in_bwd, double *frac);

extern const char *MODE_NAMES[3];
int mode_bench(void);
int mode_train(void);
extern int g_epochs, g_train_hidden, g_train_batch;
extern double g_lr;

/* The bucket caps of the cases (lab06_buckets.c): the named ones, then caps on a bucket
 * boundary and around it. */
typedef struct {
    const char *name;
    double cap, first; /* MiB; for the boundary caps, set by cap_for() */
    double boundary;   /* 0, or bytes around a bucket boundary: -1, +1, +0.5 (99 = exact) */
} caps;
extern const caps CAPS[8];
enum { C_DEFAULT, C_TWO, C_THREE, C_MANY };

/* The bucket cases: buckets.* (layout after ddp_init), rebuild.* (after iteration 1). */
void plan_buckets(const drv_test *t, drv_plan *p);
void buckets_run(drv_case *c);
void buckets_check(drv_case *c);
void buckets_teardown(drv_case *c);
void plan_rebuild(const drv_test *t, drv_plan *p);
void rebuild_run(drv_case *c);
void rebuild_check(drv_case *c);
void rebuild_teardown(drv_case *c);

#endif
