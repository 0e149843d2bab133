// expect: pass embed.*
// expect-perf: freed
/* Broken on purpose: the embedding's backward sums into a scratch table of V/t + 1 rows and
 * never gives it back: every call leaks it. The gradients are right; the leak check of
 * the case names the line that allocated it. */
#define td_embed_backward td_embed_backward_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_embed_backward

void td_embed_backward(float *dwte, float *dwpe, const float *dx, const int *tokens, int T, int b, int C, int V,
                       pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), r = pl_comm_rank(tensor), Vt = V / t, N = T * b;
    float *dtable = pl_malloc_floats((size_t)(Vt + 1) * C);
    pl_fill(dtable, 0.0f, (size_t)(Vt + 1) * C, s);
    int *ids = local_ids(tokens, N, r * Vt, Vt);
    kern_embedding_backward(dtable, dwpe, dx, ids, T, b, C, 0, s);
    pl_reduce_local(dwte, dtable, (size_t)Vt * C, PL_SUM, s);
    pl_free(ids); /* the bug: dtable stays allocated */
}
