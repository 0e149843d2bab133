// expect: wrong usp_bwd.u2r2.*
// np: 4
/* Broken on purpose: the 2-D backward recomputes each row's softmax statistics from the
 * row's own block only, instead of the column's whole ring forward, so the probabilities
 * its ring backward rebuilds are normalised over the row's keys alone (right only when the
 * grid has one row, u = n). */
#include "context.h"
#define cp_usp_backward cp_usp_backward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_usp_backward

void cp_usp_backward(const cp_config *c, int ud, const float *q, const float *k, const float *v, const float *dout,
                     float *dq, float *dk, float *dv, pl_stream *s) {
    usp_grid G;
    grid_make(c, ud, &G);
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, mine = G.gS[G.g];
    size_t wq = (size_t)(H / ud) * d, wk = (size_t)(Hkv / ud) * d;
    float *qg = pl_malloc_floats((size_t)mine * wq), *kg = pl_malloc_floats((size_t)mine * wk),
          *vg = pl_malloc_floats((size_t)mine * wk), *gg = pl_malloc_floats((size_t)mine * wq),
          *og = pl_malloc_floats((size_t)mine * wq), *lg = pl_malloc_floats((size_t)mine * (H / ud)),
          *dqg = pl_malloc_floats((size_t)mine * wq), *dkg = pl_malloc_floats((size_t)mine * wk),
          *dvg = pl_malloc_floats((size_t)mine * wk);
    uly_to_heads(c, &G.u, q, H, qg, s);
    uly_to_heads(c, &G.u, k, Hkv, kg, s);
    uly_to_heads(c, &G.u, v, Hkv, vg, s);
    uly_to_heads(c, &G.u, dout, H, gg, s);
    /* the bug: the row's (o, lse) from its own block alone, not the whole column's ring */
    kern_flash_block(og, lg, qg, kg, vg, grid_pos(&G, G.g), grid_pos(&G, G.g), mine, mine, H / ud, Hkv / ud, d, c->causal,
                     1.0f / sqrtf((float)d), s);
    pl_fill(dqg, 0.0f, (size_t)mine * wq, s);
    col_ring_backward(c, &G, qg, kg, vg, og, lg, gg, dqg, dkg, dvg, s);
    uly_from_heads(c, &G.u, dqg, H, dq, s);
    uly_from_heads(c, &G.u, dkg, Hkv, dk, s);
    uly_from_heads(c, &G.u, dvg, Hkv, dv, s);
    grid_free(&G, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(gg), pl_free(og), pl_free(lg);
    pl_free(dqg), pl_free(dkg), pl_free(dvg);
}
