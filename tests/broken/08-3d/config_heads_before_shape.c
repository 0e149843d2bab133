// expect: wrong config.errors
// np: 2
/* Broken on purpose: td_config_check tests the tensor-parallel divisibility (heads, MLP
 * width, vocabulary) before the shapes and the micro-batches. Every problem alone still
 * gets its code; a configuration with two of them gets the later one of threed.h's order. */
#define td_config_check td_config_check_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_config_check

int td_config_check(const td_config *c, int world) {
    if (c->t < 1 || c->p < 1 || world < 1 || world % (c->t * c->p)) return TD_ERR_WORLD;
    if (c->heads > 0 && c->ffn > 0 && (c->heads % c->t || c->ffn % c->t)) return TD_ERR_HEADS; /* the bug */
    if (c->vocab > 0 && c->vocab % c->t) return TD_ERR_VOCAB;
    if (c->micro < 1 || c->seq < 1 || c->batch < 1 || c->hidden < 1 || c->heads < 1 || c->ffn < 1 || c->vocab < 1 ||
        c->layers < 1 || c->hidden % c->heads)
        return TD_ERR_BATCH;
    if (c->p > c->layers) return TD_ERR_LAYERS;
    return TD_OK;
}
