// expect: wrong step.1f1b
/* Broken on purpose: pp_execute never zeroes the gradients it accumulates into, so a step
 * adds to whatever the previous step left in them (-lr g). Right only on a stage whose
 * gradient buffers happen to start at zero. */
#include "pipeline.h"
#define pl_fill(p, v, n, s) ((void)(p), (void)(v), (void)(n), (void)(s)) /* the bug: zero_grads does nothing */
#include "../../../solutions/04-pipeline/pipeline.c"
