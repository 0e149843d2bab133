// expect: wrong ring.zigzag.causal.*
/* Broken on purpose: with the zig-zag layout, a block that only the second query chunk
 * needs is computed for that chunk's queries but merged into the rows of the first chunk
 * (the output offset forgotten). */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

static void compute_merge_at_zero(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                                  const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    int n = m->n, C = chunks_of(c, n), H = c->heads, Hkv = c->kv_heads, d = c->head_dim;
    if (owner == m->me || c->layout != CP_ZIGZAG || !c->causal) {
        compute_block(c, m, owner, q, kb, vb, o, lse, ob, lb, s);
        return;
    }
    int first = chunk_len(c->seq, C, m->me);
    if (owner < m->me) { /* both query chunks against the owner's first key chunk */
        kern_flash_block(ob, lb, q, kb, vb, m->pos_d + m->off[m->me], m->pos_d + m->off[owner], m->rows[m->me],
                         chunk_len(c->seq, C, owner), H, Hkv, d, 1, 1.0f / sqrtf((float)d), s);
        kern_flash_merge(o, lse, ob, lb, m->rows[m->me] * H, d, s);
    } else { /* the second query chunk against both key chunks, merged at row 0: the bug */
        kern_flash_block(ob, lb, q + (size_t)first * H * d, kb, vb, m->pos_d + m->off[m->me] + first,
                         m->pos_d + m->off[owner], m->rows[m->me] - first, m->rows[owner], H, Hkv, d, 1,
                         1.0f / sqrtf((float)d), s);
        kern_flash_merge(o, lse, ob, lb, (m->rows[m->me] - first) * H, d, s);
    }
}
#define RING_COMPUTE compute_merge_at_zero
#include "ring_template.h"
