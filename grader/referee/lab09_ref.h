/* lab09_ref.h - what the referee's files of Lab 9 share: every rank's inputs as host arrays
 * (lab09_inputs.c), the checks against the float64 layer (lab09_check.c), the case's state
 * (lab09.c). Referee only: no student code, no lab header.
 */
#ifndef LAB09_REF_H
#define LAB09_REF_H

#include <stdint.h>

#include "lab09.h"

/* One rank's inputs of a case, from (its seed, the public seed). */
typedef struct {
    /* layer and reuse */
    float *x;              /* [calls, T, H]  this rank's tokens for each call                */
    float *wr;             /* [E, H]         public                                          */
    float *wg, *wu, *wd;   /* [Le, F, H] x2, [Le, H, F]  this rank's experts                 */
    float *dy;             /* [T, H]                                                        */
    float daux;
    /* route */
    float *logits, *dgate; /* [T, E], [T, k]                                                 */
    /* config */
    l9_cfg cfg;
    int expect_code;
    /* all-to-all-v */
    int *send_counts, *recv_counts; /* [n]                                                   */
    size_t send_total, recv_total;
    float *a2a_send;       /* [send_total]                                                   */
    /* all-reduce */
    float *ar_in;          /* [calls, count]                                                 */
} l9_inputs;

void l9_inputs_make(const l9_params *p, int rank, uint64_t seed, uint64_t pub, l9_inputs *in);
void l9_inputs_free(l9_inputs *in);
/* Element i of the all-reduce input of the rank whose seed this is. */
float l9_ar_input(uint64_t seed, size_t i);

/* What the player left in the slots, read where it lies (the referee's host view). */
typedef struct {
    int32_t code;
    const float *probs, *gate;   /* the routing: route, or the last forward's   */
    const int32_t *expert, *keep;
    float aux;
    const float *dlogits;
    const float *y, *dx, *dwr, *dwg, *dwu, *dwd;
    const float *a2a_recv;
    const float *ar_out;         /* [calls, count]                              */
    const double *counted;       /* the player's own count (lab09.h)            */
} l9_outputs;

/* Compare the player's outputs with the reference computed from every rank's seed; fails
 * the case with the reason. Every referee makes the same cross-rank calls. */
void l9_referee_check(drv_case *c, const l9_params *p, const l9_inputs *in, const l9_outputs *o,
                      const uint64_t *seeds, uint64_t pub);

#endif
