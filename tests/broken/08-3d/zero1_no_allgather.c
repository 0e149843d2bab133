// expect: wrong step.*
/* Broken on purpose: after AdamW on its shard no rank all-gathers the parameters: each
 * data rank's copy is updated only in the shard it owns, the rest is stale. */
#include "threed.h"
#define pl_allgather(sb, rb, n, c, s) ((void)(sb), (void)(rb), (void)(n), (void)(c), (void)(s)) /* the bug */
#include "../../../solutions/08-3d/threed.c"
