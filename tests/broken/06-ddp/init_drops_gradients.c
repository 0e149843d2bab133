// expect: wrong accumulate.*
/* Broken on purpose: the buckets ddp_init builds start at zero (the gradients are "zero
 * before the first step anyway"); only a rebuild copies what the old buffers held. A
 * gradient the model holds before ddp_init is lost, so accumulating onto it goes wrong. */
#include "ddp.h"
#define pl_copy(dst, src, bytes, s) (nold ? pl_copy(dst, src, bytes, s) : pl_fill(dst, 0.0f, (bytes) / sizeof(float), s))
#include "../../../solutions/06-ddp/ddp.c"
