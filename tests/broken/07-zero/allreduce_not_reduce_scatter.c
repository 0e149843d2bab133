// expect: wrong traffic.z1
/* Broken on purpose: ZeRO-1 all-reduces every gradient bucket (DDP's collective) and then
 * steps its shard: the parameters are right, but it moves twice the gradient bytes. */
#define pl_reduce_scatter pl_reduce_scatter_unused
#include "../../../solutions/07-zero/zero.c"
#undef pl_reduce_scatter
/* the solution's reduce-scatters, each replaced by an all-reduce of the whole bucket */
void pl_reduce_scatter_unused(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    size_t total = n * (size_t)pl_comm_size(c);
    float *all = pl_malloc_tagged(total * sizeof(float), PL_MEM_REDUCE);
    pl_copy(all, sb, total * sizeof(float), s);
    pl_allreduce(all, all, total, op, c, s);
    pl_copy(rb, all + (size_t)pl_comm_rank(c) * n, n * sizeof(float), s);
    pl_free(all);
}
