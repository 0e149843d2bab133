// expect: wrong train.bf16.*
/* Broken on purpose: the bf16 parameters are made from the fp32 master weights by
 * truncation (dropping the low 16 bits) instead of rounding to nearest even: each is off by
 * up to one unit in the last place, always towards zero. */
#define zero_step zero_step_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_step
static void truncate_into(uint16_t *dst, const float *master, size_t n) {
    float *h = malloc(n * 4 + 4);
    uint16_t *w = malloc(n * 2 + 2);
    pl_download(h, master, n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &h[i], 4);
        w[i] = (uint16_t)(u >> 16); /* the bug */
    }
    pl_upload(dst, w, n * 2);
    free(h), free(w);
}
void zero_step(zero_state *z) {
    zero_step_solution(z);
    ext *x = X(z);
    if (z->cfg.param_dtype != ZERO_BF16) return;
    if (z->cfg.stage == 3) {
        for (int u = 0; u < z->model->nunits; u++) truncate_into(x->u3[u].param, x->u3[u].master, x->u3[u].S);
        return;
    }
    for (int b = 0; b < z->nbuckets; b++) { /* redo the gather with truncated parameters */
        const zero_bucket *bk = &z->bucket[b];
        uint16_t *buf = (uint16_t *)x->params + bk->offset, *own = buf + (size_t)z->rank * bk->shard;
        truncate_into(own, x->master + x->shard_off[b], bk->shard);
        pl_allgather_bf16(own, buf, bk->shard, z->comm, NULL);
    }
}
