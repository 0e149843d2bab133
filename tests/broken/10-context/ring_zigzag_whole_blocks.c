// expect: wrong ring.zigzag.causal.*
/* Broken on purpose: with the zig-zag layout every block is computed whole (both query
 * chunks against both key chunks), never the half that is needed: right outputs, balanced
 * work, but twice the work zig-zag ring attention does. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

static void compute_whole_unless_masked(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                                        const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    kern_flash_block(ob, lb, q, kb, vb, m->pos_d + m->off[m->me], m->pos_d + m->off[owner], m->rows[m->me],
                     m->rows[owner], c->heads, c->kv_heads, c->head_dim, c->causal, 1.0f / sqrtf((float)c->head_dim), s);
    kern_flash_merge(o, lse, ob, lb, m->rows[m->me] * c->heads, c->head_dim, s);
}
#define RING_COMPUTE compute_whole_unless_masked
#include "ring_template.h"
