// expect: wrong recompute.1f1b
/* Broken on purpose: with recomputation on, the records are still made with
 * recompute = false, so every activation is stashed anyway: the results are right, the
 * memory is the same as without, and nothing is ever rebuilt. */
#include "pipeline.h"
#define gpt_acts_alloc(c, recompute) gpt_acts_alloc(c, false) /* the bug */
#include "../../../solutions/04-pipeline/pipeline.c"
