// expect: wrong ring_bwd.*
/* Broken on purpose: the backward recomputes each block's softmax statistics from that
 * block alone (its own log-sum-exp, from kern_flash_block) instead of reusing the forward's
 * lse over the whole sequence, so every block's probabilities are normalised as if its keys
 * were the only ones. */
#include "context.h"
#define cp_ring_backward cp_ring_backward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_backward

static void backward_block_lse(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                               const float *vb, const float *o, const float *lse, const float *dout, float *dq,
                               float *dkb, float *dvb, pl_stream *s) {
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, qoff, nq, koff, nk;
    (void)lse;
    if (!block_runs(c, m, owner, &qoff, &nq, &koff, &nk)) return;
    size_t qrow = (size_t)H * d, krow = (size_t)Hkv * d;
    float *ob = pl_malloc_floats((size_t)nq * qrow), *lb = pl_malloc_floats((size_t)nq * H);
    const int *qp = m->pos_d + m->off[m->me] + qoff, *kp = m->pos_d + m->off[owner] + koff;
    kern_flash_block(ob, lb, q + qoff * qrow, kb + koff * krow, vb + koff * krow, qp, kp, nq, nk, H, Hkv, d, c->causal,
                     1.0f / sqrtf((float)d), s);
    kern_flash_block_backward(dq + qoff * qrow, dkb + koff * krow, dvb + koff * krow, q + qoff * qrow, kb + koff * krow,
                              vb + koff * krow, o + qoff * qrow, lb, dout + qoff * qrow, qp, kp, nq, nk, H, Hkv, d,
                              c->causal, 1.0f / sqrtf((float)d), s);
    pl_stream_sync(s);
    pl_free(ob);
    pl_free(lb);
}
#define BWD_COMPUTE backward_block_lse
#include "bwd_template.h"
