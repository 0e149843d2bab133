// expect: wrong config.seq_mismatch
/* Broken on purpose: cp_config_check looks at this rank's fields only, so ranks that
 * disagree on the sequence length each say CP_OK (or another code) instead of
 * CP_ERR_MISMATCH on every rank. */
#include "context.h"
#define cp_config_check cp_config_check_solution
#include "../../../solutions/10-context/context.c"
#undef cp_config_check

int cp_config_check(const cp_config *c, int ulysses) {
    int n = pl_comm_size(c->comm);
    if (c->seq < 1 || c->heads < 1 || c->kv_heads < 1 || c->head_dim < 1 || c->heads % c->kv_heads != 0 ||
        (c->causal != 0 && c->causal != 1) || (c->layout != CP_CONTIGUOUS && c->layout != CP_ZIGZAG) ||
        c->seq < chunks_of(c, n))
        return CP_ERR_SHAPE;
    if (ulysses && (c->heads % n != 0 || c->kv_heads % n != 0)) return CP_ERR_HEADS;
    return CP_OK;
}
