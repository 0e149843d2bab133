// expect: wrong layer.*
/* Broken on purpose: the combine adds the experts' outputs without weighting them by the
 * gates (y[t] = sum_j FFN_e(x[t]) instead of sum_j gate_j FFN_e(x[t])). */
#include "kern_moe.h"
#include "moe.h"
#define kern_moe_gather(out, rows, slot, weight, T, k, H, s) kern_moe_gather(out, rows, slot, NULL, T, k, H, s)
#include "../../../solutions/09-moe/moe_layer.c"
#undef kern_moe_gather
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"
