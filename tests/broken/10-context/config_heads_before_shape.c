// expect: wrong config.shape_and_heads
/* Broken on purpose: cp_config_check tests Ulysses' head divisibility before the shape,
 * so a configuration with both errors reports CP_ERR_HEADS (context.h: SHAPE first). */
#include "context.h"
#define cp_config_check cp_config_check_solution
#include "../../../solutions/10-context/context.c"
#undef cp_config_check

int cp_config_check(const cp_config *c, int ulysses) {
    int n = pl_comm_size(c->comm);
    int rc = cp_config_check_solution(c, 0);
    if (rc == CP_ERR_MISMATCH) return rc;
    if (ulysses && c->heads >= 1 && c->kv_heads >= 1 && (c->heads % n != 0 || c->kv_heads % n != 0)) return CP_ERR_HEADS;
    return rc;
}
