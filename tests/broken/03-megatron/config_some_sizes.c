// expect: wrong config.errors
// np: 1
/* Broken on purpose: mg_config_check tests "a size below 1" for the sequence and the batch
 * only, the two sizes a caller's data sets. hidden 0 and ffn 0 pass as valid, and heads 0
 * reaches hidden % heads: a division by zero. Caught at one rank already. */
#define mg_config_check mg_config_check_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_config_check

int mg_config_check(const mg_config *c) {
    int tp = pl_comm_size(c->tp);
    if (c->seq <= 0 || c->batch <= 0) return MG_ERR_SHAPE; /* the bug: not every size */
    if (c->heads % tp != 0) return MG_ERR_HEADS;
    if (c->sp && c->seq % tp != 0) return MG_ERR_SEQ;
    if (c->heads > 0 && (c->hidden % c->heads != 0 || c->ffn % tp != 0)) return MG_ERR_SHAPE;
    return MG_OK;
}
