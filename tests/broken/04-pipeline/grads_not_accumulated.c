// expect: wrong step.1f1b
/* Broken on purpose: every backward starts from a zeroed gradient, so after the step each
 * block holds the last micro-batch's gradient alone instead of the sum over all m. */
#include "pipeline.h"
#define gpt_block_backward(p, g, a, dx, dy, ws, s) \
    (pl_fill((g)->base, 0.0f, (g)->count, s), gpt_block_backward(p, g, a, dx, dy, ws, s)) /* the bug */
#include "../../../solutions/04-pipeline/pipeline.c"
