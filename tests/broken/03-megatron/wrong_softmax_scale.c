// expect: wrong forward.nosp
/* Broken on purpose: the attention scores are scaled by 1/sqrt(hidden) instead of
 * 1/sqrt(head size). */
#include <math.h>
#define sqrtf(x) sqrtf((float)d.C) /* every sqrtf in the solution is the softmax scale */
#include "../../../solutions/03-megatron/megatron.c"
