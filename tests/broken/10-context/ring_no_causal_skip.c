// expect: wrong ring.contig.causal.*
/* Broken on purpose: every block is computed whole, also those entirely above the causal
 * diagonal. The mask makes them contribute nothing, so the outputs are right, but the
 * work is that of full attention: the first rank does n blocks where it needs one. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

static void compute_whole(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                          const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    kern_flash_block(ob, lb, q, kb, vb, m->pos_d + m->off[m->me], m->pos_d + m->off[owner], m->rows[m->me],
                     m->rows[owner], c->heads, c->kv_heads, c->head_dim, c->causal, 1.0f / sqrtf((float)c->head_dim), s);
    kern_flash_merge(o, lse, ob, lb, m->rows[m->me] * c->heads, c->head_dim, s);
}
#define RING_COMPUTE compute_whole
#include "ring_template.h"
