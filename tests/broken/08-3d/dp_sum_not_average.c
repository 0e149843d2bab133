// expect: wrong step.*
/* Broken on purpose: the data group's reduce-scatter sums the replicas' gradients instead
 * of averaging them: the gradient of d times the global mean loss. */
#include "threed.h"
#define pl_reduce_scatter(sb, rb, n, op, c, s) pl_reduce_scatter(sb, rb, n, PL_SUM, c, s) /* the bug */
#include "../../../solutions/08-3d/threed.c"
