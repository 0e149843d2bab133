// expect: wrong config.hidden_mismatch
/* Broken on purpose: moe_config_check looks at this rank's fields only. A rank whose hidden
 * size differs passes its own check, and the layer would hang or fail later on a message
 * of the wrong size. */
#include "moe.h"
#define moe_config_check moe_config_check_solution
#include "../../../solutions/09-moe/moe_layer.c"
#undef moe_config_check
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

int moe_config_check(const moe_config *c) {
    if (c->tokens < 0 || c->hidden < 1 || c->ffn < 1 || c->experts < 1) return MOE_ERR_SHAPE;
    if ((c->top_k != 1 && c->top_k != 2) || c->top_k > c->experts) return MOE_ERR_TOPK;
    if (!(c->capacity_factor > 0)) return MOE_ERR_CAPACITY;
    if (c->experts % pl_comm_size(c->comm)) return MOE_ERR_EXPERTS;
    return MOE_OK;
}
