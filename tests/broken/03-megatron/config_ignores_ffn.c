// expect: wrong config.errors
/* Broken on purpose: mg_config_check checks the heads, the sequence and hidden % heads, and
 * forgets that the MLP's width must split over the ranks too (ffn % tp: MG_ERR_SHAPE). */
#define mg_config_check mg_config_check_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_config_check
int mg_config_check(const mg_config *c);

int mg_config_check(const mg_config *c) {
    int tp = pl_comm_size(c->tp);
    if (c->seq <= 0 || c->batch <= 0 || c->hidden <= 0 || c->heads <= 0 || c->ffn <= 0) return MG_ERR_SHAPE;
    if (c->heads % tp != 0) return MG_ERR_HEADS;
    if (c->sp && c->seq % tp != 0) return MG_ERR_SEQ;
    if (c->hidden % c->heads != 0) return MG_ERR_SHAPE; /* the bug: no ffn % tp */
    return MG_OK;
}
