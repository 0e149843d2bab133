// expect: wrong step.1f1b
/* Broken on purpose: the head's backward takes loss_scale 1 instead of 1/m, so the
 * accumulated gradient is that of the sum of the micro-batches' losses: m times too big. */
#include "pipeline.h"
#define gpt_head_backward(p, g, a, dx, scale, ws, s) gpt_head_backward(p, g, a, dx, 1.0f, ws, s) /* the bug */
#include "../../../solutions/04-pipeline/pipeline.c"
