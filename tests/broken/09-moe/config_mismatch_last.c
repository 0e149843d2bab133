// expect: wrong config.mismatch_and_shape
// np: 2
/* Broken on purpose: moe_config_check compares the fields over the ranks (every rank joins
 * the all-reduce) but looks at its own fields first. Ranks that agree get the right code;
 * when they differ and one of them also has a bad shape, that rank says MOE_ERR_SHAPE and
 * the others MOE_ERR_MISMATCH: the ranks disagree on the code. */
#include "moe.h"
#define moe_config_check moe_config_check_solution
#include "../../../solutions/09-moe/moe_layer.c"
#undef moe_config_check
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

int moe_config_check(const moe_config *c) {
    enum { NF = 7 };
    float v[2 * NF] = {(float)c->tokens, (float)c->hidden, (float)c->ffn, (float)c->experts, (float)c->top_k,
                       c->capacity_factor, c->aux_alpha};
    for (int i = 0; i < NF; i++) v[NF + i] = -v[i];
    float *d = pl_malloc_floats(2 * NF);
    pl_upload(d, v, sizeof v);
    pl_allreduce(d, d, 2 * NF, PL_MAX, c->comm, NULL);
    float m[2 * NF];
    pl_download(m, d, sizeof m);
    pl_free(d);
    /* the bug: this rank's own errors before the comparison */
    if (c->tokens < 0 || c->hidden < 1 || c->ffn < 1 || c->experts < 1) return MOE_ERR_SHAPE;
    if ((c->top_k != 1 && c->top_k != 2) || c->top_k > c->experts) return MOE_ERR_TOPK;
    if (!(c->capacity_factor > 0)) return MOE_ERR_CAPACITY;
    for (int i = 0; i < NF; i++)
        if (m[i] != -m[NF + i]) return MOE_ERR_MISMATCH;
    if (c->experts % pl_comm_size(c->comm)) return MOE_ERR_EXPERTS;
    return MOE_OK;
}
