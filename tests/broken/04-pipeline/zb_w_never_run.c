// expect: wrong step.zbh1
/* Broken on purpose: zero bubble's W actions do nothing but release the record
 * (gpt_acts_reset), so no block ever gets a weight gradient: the weights do not move. */
#include "pipeline.h"
#define gpt_block_backward_weight(p, g, a, ws, s) gpt_acts_reset(a) /* the bug */
#include "../../../solutions/04-pipeline/pipeline.c"
