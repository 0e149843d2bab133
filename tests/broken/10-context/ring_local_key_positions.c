// expect: wrong ring.*.causal.*
/* Broken on purpose: the causal mask compares the queries' positions in the sequence with
 * the keys' positions inside their own block (0, 1, ... as if every block started the
 * sequence): keys of later blocks leak into earlier queries' attention. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

static void compute_local_keys(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                               const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    /* the key positions of rank 0's block (0, 1, ... under the contiguous layout): the bug */
    kern_flash_block(ob, lb, q, kb, vb, m->pos_d + m->off[m->me], m->pos_d, m->rows[m->me], m->rows[owner], c->heads,
                     c->kv_heads, c->head_dim, c->causal, 1.0f / sqrtf((float)c->head_dim), s);
    kern_flash_merge(o, lse, ob, lb, m->rows[m->me] * c->heads, c->head_dim, s);
}
#define RING_COMPUTE compute_local_keys
#include "ring_template.h"
