// expect: pass memory.1f1b step.gpipe
// expect-perf: freed
/* Broken on purpose: the activation records the step made are never freed: every step
 * leaves its stash allocated. The results, the traffic and the peak are right. */
#include "pipeline.h"
#define gpt_acts_free(a) ((void)(a)) /* the bug */
#include "../../../solutions/04-pipeline/pipeline.c"
