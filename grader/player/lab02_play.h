/* lab02_play.h - what Lab 2's player files share (lab02.c: the cases' calls; lab02_modes.c:
 * `--run scaling` and `--run bench`): the MLP step both time. */
#ifndef LAB02_PLAY_H
#define LAB02_PLAY_H

#include "lab02.h"     // defines: the case table's shapes and ids
#include "tp_linear.h" // defines: the lab API

/* One training step of the MLP: forward, then backward (their codes are the cases' to
 * check; a step only runs once init succeeded). */
typedef struct {
    tp_mlp m;
    pl_tensor x, y, dy, dx;
    pl_stream *st; /* the stream both calls are given (NULL: the default one) */
} lab2_step;
void lab2_step_run(void *arg);

#endif
