// expect: wrong comm.sp
/* Broken on purpose: mg_sync_sp_grads sums the replicated gradients with a reduce-scatter
 * and an all-gather instead of one all-reduce. The values are the same; it is two
 * collectives where the API says one, and the grader counts them. */
#define mg_sync_sp_grads mg_sync_sp_grads_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_sync_sp_grads
void mg_sync_sp_grads(const mg_config *c, mg_params *g, pl_stream *s);

void mg_sync_sp_grads(const mg_config *c, mg_params *g, pl_stream *s) {
    int tp = pl_comm_size(c->tp);
    if (!c->sp || tp == 1) return;
    size_t blk = g->replicated / (size_t)tp; /* 6 C: a multiple of tp in the grader's shapes */
    float *part = pl_malloc_floats(blk);
    pl_reduce_scatter(g->base, part, blk, PL_SUM, c->tp, s);
    pl_allgather(part, g->base, blk, c->tp, s);
    pl_stream_sync(s ? s : pl_stream_compute());
    pl_free(part);
}
