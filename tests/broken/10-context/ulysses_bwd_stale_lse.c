// expect: wrong ulysses_bwd.*.causal.*
/* Broken on purpose: the backward recomputes the head split's attention without the
 * causal mask (causal = 0 in the recomputation only), so its log-sum-exps and outputs are
 * those of full attention: the probabilities the backward rebuilds from them are wrong for
 * every query that may not see the whole sequence. */
#include "context.h"
#define cp_ulysses_backward cp_ulysses_backward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ulysses_backward

void cp_ulysses_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *dout,
                         float *dq, float *dk, float *dv, pl_stream *s) {
    uly_plan u;
    uly_make(c, &u);
    int n = u.m.n, S = c->seq, d = c->head_dim, H = c->heads, Hkv = c->kv_heads;
    size_t wq = (size_t)(H / n) * d, wk = (size_t)(Hkv / n) * d;
    float *qg = pl_malloc_floats((size_t)S * wq), *kg = pl_malloc_floats((size_t)S * wk),
          *vg = pl_malloc_floats((size_t)S * wk), *gg = pl_malloc_floats((size_t)S * wq),
          *og = pl_malloc_floats((size_t)S * wq), *lg = pl_malloc_floats((size_t)S * (H / n)),
          *dqg = pl_malloc_floats((size_t)S * wq), *dkg = pl_malloc_floats((size_t)S * wk),
          *dvg = pl_malloc_floats((size_t)S * wk);
    uly_to_heads(c, &u, q, H, qg, s);
    uly_to_heads(c, &u, k, Hkv, kg, s);
    uly_to_heads(c, &u, v, Hkv, vg, s);
    uly_to_heads(c, &u, dout, H, gg, s);
    float scale = 1.0f / sqrtf((float)d);
    kern_flash_block(og, lg, qg, kg, vg, u.m.pos_d, u.m.pos_d, S, S, H / n, Hkv / n, d, 0 /* the bug */, scale, s);
    pl_fill(dqg, 0.0f, (size_t)S * wq, s);
    pl_fill(dkg, 0.0f, (size_t)S * wk, s);
    pl_fill(dvg, 0.0f, (size_t)S * wk, s);
    kern_flash_block_backward(dqg, dkg, dvg, qg, kg, vg, og, lg, gg, u.m.pos_d, u.m.pos_d, S, S, H / n, Hkv / n, d,
                              c->causal, scale, s);
    uly_from_heads(c, &u, dqg, H, dq, s);
    uly_from_heads(c, &u, dkg, Hkv, dk, s);
    uly_from_heads(c, &u, dvg, Hkv, dv, s);
    uly_free(&u, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(gg), pl_free(og), pl_free(lg);
    pl_free(dqg), pl_free(dkg), pl_free(dvg);
}
