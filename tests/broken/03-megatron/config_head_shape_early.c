// expect: wrong config.errors
// np: 2
/* Broken on purpose: mg_config_check tests hidden % heads together with the heads, before
 * the sequence ("the heads' shape belongs with the heads"). Each problem alone gets its
 * code; sp with an odd sequence and a hidden size the heads do not divide gets
 * MG_ERR_SHAPE where megatron.h's order says MG_ERR_SEQ. */
#define mg_config_check mg_config_check_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_config_check

int mg_config_check(const mg_config *c) {
    int tp = pl_comm_size(c->tp);
    if (c->seq <= 0 || c->batch <= 0 || c->hidden <= 0 || c->heads <= 0 || c->ffn <= 0) return MG_ERR_SHAPE;
    if (c->heads % tp != 0) return MG_ERR_HEADS;
    if (c->hidden % c->heads != 0) return MG_ERR_SHAPE; /* the bug: before the sequence */
    if (c->sp && c->seq % tp != 0) return MG_ERR_SEQ;
    if (c->ffn % tp != 0) return MG_ERR_SHAPE;
    return MG_OK;
}
