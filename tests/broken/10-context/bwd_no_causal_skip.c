// expect: wrong ring_bwd.contig.causal.*
/* Broken on purpose: the backward computes every block whole, also those entirely above
 * the causal diagonal: right gradients (the mask gives them nothing), the work of full
 * attention. */
#include "context.h"
#define cp_ring_backward cp_ring_backward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_backward

static void backward_whole(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                           const float *vb, const float *o, const float *lse, const float *dout, float *dq, float *dkb,
                           float *dvb, pl_stream *s) {
    kern_flash_block_backward(dq, dkb, dvb, q, kb, vb, o, lse, dout, m->pos_d + m->off[m->me], m->pos_d + m->off[owner],
                              m->rows[m->me], m->rows[owner], c->heads, c->kv_heads, c->head_dim, c->causal,
                              1.0f / sqrtf((float)c->head_dim), s);
}
#define BWD_COMPUTE backward_whole
#include "bwd_template.h"
