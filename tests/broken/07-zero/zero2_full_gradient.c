// expect: wrong memory.z2
/* Broken on purpose: ZeRO-2 gives every bucket a gradient buffer of its own, kept until the
 * end: the reduce-scatters are right and on time, but the full gradient exists at once. */
#define zero_init zero_init_solution
#define zero_pre_backward zero_pre_backward_solution
#define zero_post_backward zero_post_backward_solution
#define zero_free zero_free_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_init
#undef zero_pre_backward
#undef zero_post_backward
#undef zero_free
static void *g_bucket_grad[ZERO_MAX_BUCKETS];
void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    zero_init_solution(z, m, cfg, comm, init);
    for (int b = 0; cfg->stage == 2 && b < z->nbuckets; b++)
        g_bucket_grad[b] = zalloc(z->bucket[b].padded * X(z)->es, PL_MEM_REDUCE); /* the bug */
}
const void *zero_pre_backward(zero_state *z, int u, void **grad) {
    const void *p = zero_pre_backward_solution(z, u, grad);
    if (z->cfg.stage == 2) {
        ext *x = X(z);
        int b = x->bucket_of[u];
        *grad = at(g_bucket_grad[b], x->uoff[u] - z->bucket[b].offset, x->es);
    }
    return p;
}
void zero_post_backward(zero_state *z, int u) {
    ext *x = X(z);
    if (z->cfg.stage != 2) {
        zero_post_backward_solution(z, u);
        return;
    }
    int b = x->bucket_of[u];
    const zero_bucket *bk = &z->bucket[b];
    if (u != bk->first_unit - bk->nunits + 1) return;
    comm_after_compute(x);
    if (z->cfg.param_dtype == ZERO_BF16 && z->cfg.reduce_dtype == ZERO_BF16)
        pl_reduce_scatter_bf16(g_bucket_grad[b], at(x->grad_shard, x->shard_off[b], 2), bk->shard, PL_AVG, z->comm,
                               pl_stream_comm());
    else
        pl_reduce_scatter(g_bucket_grad[b], at(x->grad_shard, x->shard_off[b], 4), bk->shard, PL_AVG, z->comm,
                          pl_stream_comm());
}
void zero_free(zero_state *z) {
    for (int b = 0; b < ZERO_MAX_BUCKETS; b++) pl_free(g_bucket_grad[b]), g_bucket_grad[b] = NULL;
    zero_free_solution(z);
}
