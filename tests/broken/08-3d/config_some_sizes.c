// expect: wrong config.errors
// np: 1
/* Broken on purpose: td_config_check tests "below 1" for the micro-batches, the sequence and
 * the batch only, the sizes the data brings. A model with no hidden size, MLP width,
 * vocabulary or layers passes as valid (0 layers reads as too few for the stages), and
 * heads 0 reaches hidden % heads: a division by zero. */
#define td_config_check td_config_check_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_config_check

int td_config_check(const td_config *c, int world) {
    if (c->t < 1 || c->p < 1 || world < 1 || world % (c->t * c->p)) return TD_ERR_WORLD;
    if (c->micro < 1 || c->seq < 1 || c->batch < 1) return TD_ERR_BATCH; /* the bug: not every size */
    if (c->heads > 0 && c->hidden % c->heads) return TD_ERR_BATCH;
    if (c->heads % c->t || c->ffn % c->t) return TD_ERR_HEADS;
    if (c->vocab % c->t) return TD_ERR_VOCAB;
    if (c->p > c->layers) return TD_ERR_LAYERS;
    return TD_OK;
}
