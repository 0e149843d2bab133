// expect: full ring.*
/* A correct alternative, written differently from the solution: each block is computed
 * one (query chunk, key chunk) pair at a time, every pair with an unmasked (query, key)
 * pair, the diagonal block's masked pair skipped too, each merged as it comes. Less work
 * than the solution's diagonal block; the same outputs and traffic. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

static void compute_pairs(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                          const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    int n = m->n, C = chunks_of(c, n), H = c->heads, Hkv = c->kv_heads, d = c->head_dim;
    int qch[2], kch[2], nqc = chunks_of_rank(c, n, m->me, qch), nkc = chunks_of_rank(c, n, owner, kch);
    int qoff = 0;
    for (int a = 0; a < nqc; a++) {
        int ql = chunk_len(c->seq, C, qch[a]), koff = 0;
        for (int b = 0; b < nkc; b++) {
            int kl = chunk_len(c->seq, C, kch[b]);
            if (chunk_pair_needed(c, C, qch[a], kch[b])) {
                kern_flash_block(ob, lb, q + (size_t)qoff * H * d, kb + (size_t)koff * Hkv * d,
                                 vb + (size_t)koff * Hkv * d, m->pos_d + m->off[m->me] + qoff,
                                 m->pos_d + m->off[owner] + koff, ql, kl, H, Hkv, d, c->causal,
                                 1.0f / sqrtf((float)d), s);
                kern_flash_merge(o + (size_t)qoff * H * d, lse + (size_t)qoff * H, ob, lb, ql * H, d, s);
            }
            koff += kl;
        }
        qoff += ql;
    }
}
#define RING_COMPUTE compute_pairs
#include "ring_template.h"
