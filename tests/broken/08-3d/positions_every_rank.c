// expect: wrong embed.*
/* Broken on purpose: every tensor rank adds the position embedding to its partial lookup
 * before the all-reduce, so x carries t copies of the positions. */
#define td_embed_forward td_embed_forward_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_embed_forward

void td_embed_forward(float *x, const float *wte, const float *wpe, const int *tokens, int T, int b, int C, int V,
                      pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), r = pl_comm_rank(tensor), Vt = V / t, N = T * b;
    float *table = pl_malloc_floats((size_t)(Vt + 1) * C);
    pl_copy(table, wte, (size_t)Vt * C * sizeof(float), s);
    pl_fill(table + (size_t)Vt * C, 0.0f, (size_t)C, s);
    int *ids = local_ids(tokens, N, r * Vt, Vt);
    kern_embedding_forward(x, ids, table, wpe, T, b, C, 0, s); /* the bug: positions on every rank */
    if (t > 1) pl_allreduce(x, x, (size_t)N * C, PL_SUM, tensor, s);
    pl_free(table), pl_free(ids);
}
