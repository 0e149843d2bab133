// expect: wrong errors.config
// np: 2
/* Broken on purpose: pp_config_check tests the micro-batches and the chunks before the
 * stages. Each problem alone gets its code; p 5 > L 4 with m 0 gets PP_ERR_MICRO where
 * pipeline.h's order says PP_ERR_STAGES comes first. */
#define pp_config_check pp_config_check_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_config_check

int pp_config_check(const pp_config *c) {
    if (c->micro < 1) return PP_ERR_MICRO; /* the bug: before the stages */
    if (c->chunks < 1 || c->chunks > PP_MAX_CHUNKS) return PP_ERR_CHUNKS;
    if (c->stages < 1 || c->stages > PP_MAX_STAGES || c->layers < c->stages) return PP_ERR_STAGES;
    if (c->chunks > 1 && c->schedule != PP_INTERLEAVED) return PP_ERR_CHUNKS;
    if (c->chunks * c->stages > c->layers) return PP_ERR_CHUNKS;
    if (c->schedule == PP_INTERLEAVED && c->micro % c->stages != 0) return PP_ERR_DIVIDE;
    return PP_OK;
}
