// expect: wrong config.errors
// np: 2
/* Broken on purpose: mg_config_check tests the sequence before the heads. Each problem
 * alone gets its code; heads % tp together with seq % tp under sp gets MG_ERR_SEQ where
 * megatron.h's order says MG_ERR_HEADS. */
#define mg_config_check mg_config_check_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_config_check

int mg_config_check(const mg_config *c) {
    int tp = pl_comm_size(c->tp);
    if (c->seq <= 0 || c->batch <= 0 || c->hidden <= 0 || c->heads <= 0 || c->ffn <= 0) return MG_ERR_SHAPE;
    if (c->sp && c->seq % tp != 0) return MG_ERR_SEQ; /* the bug: before the heads */
    if (c->heads % tp != 0) return MG_ERR_HEADS;
    if (c->hidden % c->heads != 0 || c->ffn % tp != 0) return MG_ERR_SHAPE;
    return MG_OK;
}
