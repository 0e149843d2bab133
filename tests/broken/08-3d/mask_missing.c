// expect: wrong embed.*
/* Broken on purpose: the lookup does not mask the tokens this rank does not hold: it
 * wraps them into its shard (id mod V/t), so after the all-reduce every token's row is the
 * sum of t rows, one from each shard. */
#define td_embed_forward td_embed_forward_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_embed_forward

void td_embed_forward(float *x, const float *wte, const float *wpe, const int *tokens, int T, int b, int C, int V,
                      pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), r = pl_comm_rank(tensor), Vt = V / t, N = T * b;
    int *h = malloc((size_t)N * sizeof *h), *ids = pl_malloc((size_t)N * sizeof *ids);
    for (int i = 0; i < N; i++) h[i] = tokens[i] % Vt; /* the bug: no mask */
    pl_upload(ids, h, (size_t)N * sizeof *h);
    float *zeros = pl_malloc_floats((size_t)T * C);
    pl_fill(zeros, 0.0f, (size_t)T * C, s);
    kern_embedding_forward(x, ids, wte, r == 0 ? wpe : zeros, T, b, C, 0, s);
    if (t > 1) pl_allreduce(x, x, (size_t)N * C, PL_SUM, tensor, s);
    pl_free(ids), pl_free(zeros), free(h);
}
