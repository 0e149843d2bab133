// expect: wrong errors.config
// expect-message: PP_MAX_CHUNKS
/* Broken on purpose: pp_config_check tests v < 1 but not v > PP_MAX_CHUNKS ("the layers
 * bound v anyway"). With enough layers a configuration of 9 chunks per stage passes the
 * check, and pp_plan then fills pp_stage_plan's chunk[PP_MAX_CHUNKS] past its end. */
#define pp_config_check pp_config_check_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_config_check
int pp_config_check(const pp_config *c);

int pp_config_check(const pp_config *c) {
    if (c->chunks > PP_MAX_CHUNKS && c->chunks * c->stages <= c->layers && c->schedule == PP_INTERLEAVED &&
        c->stages >= 1 && c->stages <= PP_MAX_STAGES && c->layers >= c->stages && c->micro >= 1)
        return c->micro % c->stages ? PP_ERR_DIVIDE : PP_OK; /* the bug: no upper bound on v */
    return pp_config_check_solution(c);
}
