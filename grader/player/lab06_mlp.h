/* lab06_mlp.h - the player's half of Lab 6: the MLP the student's DDP trains (forward,
 * backward reporting every gradient to the student's ddp_state, SGD + momentum), built from
 * the weights the referee gives, and what one backward's trace shows. The modes (bench,
 * train) use it too, with weights of their own. Player side only: nothing here judges. */
#ifndef LAB06_MLP_H
#define LAB06_MLP_H

#include "ddp.h"          // defines: the lab API (ddp_param, ddp_state, ...)
#include "lab06.h"        // defines: LAB6_*, lab6_step, lab6_layout
#include "pl_costmodel.h" // defines: plc_profile, plc_prediction

typedef struct {
    int in, hidden, classes, max_rows;
    ddp_param p[LAB6_NPARAMS];
    float *grad_own[LAB6_NPARAMS]; /* the model's gradient storage (DDP may point elsewhere) */
    float *mom[LAB6_NPARAMS];
    float *x, *a1, *h1, *a2, *h2, *logits, *probs, *losses, *dlogits, *dh2, *dh1;
    int *labels;
    float lr, momentum;
    unsigned bias_first; /* lab6_bias_first: layers that report the bias before the weight */
    /* where each ddp_grad_ready call of the last backward begins and ends in the trace */
    size_t hook_at[LAB6_NPARAMS], hook_end[LAB6_NPARAMS];
    int nhooks;
} mlp;

/* Buffers for max_rows rows; parameters from host values (registration order,
 * concatenated: lab6_offset) or from the counter RNG (the modes); gradients and momentum
 * zero. */
void mlp_alloc(mlp *m, int in, int hidden, int classes, int max_rows);
void mlp_load(mlp *m, const float *host);
void mlp_init_random(mlp *m, uint64_t seed);
void mlp_free(mlp *m);
void mlp_reset_grads(mlp *m); /* after ddp_free: gradients back into the model's own storage */
double mlp_forward(mlp *m, const float *x, const int *y, int rows); /* host rows; mean loss */
/* Backward of the last forward, reporting each gradient to d (or NULL); accumulate adds. */
void mlp_backward(mlp *m, ddp_state *d, int rows, bool accumulate);
void mlp_step(mlp *m);
void mlp_download(const mlp *m, float *host); /* every parameter, concatenated */

/* The student's layout as its ddp_state holds it (bounds-checked reads of its fields). */
void lab6_read_layout(const ddp_state *d, const mlp *m, lab6_layout *out);
/* The trace of one backward: all-reduces in order, their sizes, the ddp_grad_ready call
 * each started in, how many started inside the backward region by time and the fraction
 * of their time inside it. */
void lab6_scan_trace(const mlp *m, lab6_step *out);

/* --profile, loaded before the player is confined (NULL without one). */
const plc_profile *lab6_profile(void);
/* The recorded events replayed on the profile (collective over the world); false when
 * there is no profile or the replay fails. */
bool lab6_predict(plc_prediction *pp);

#endif
