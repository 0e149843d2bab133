// expect: wrong ulysses_bwd.*.causal.*
/* Broken on purpose: the backward recomputes the head split's attention without the
 * causal mask (causal = 0 in the recomputation only), so its log-sum-exps and outputs are
 * those of full attention: the probabilities the backward rebuilds from them are wrong for
 * every query that may not see the whole sequence. The solution's code, with the forward
 * kernel of cp_ulysses_backward called unmasked. */
#include "context.h"
#include "kern_flash.h"

static int in_backward; /* inside cp_ulysses_backward */
static void block_unmasked(float *o, float *lse, const float *q, const float *k, const float *v, const int *q_pos,
                           const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale,
                           pl_stream *s) {
    kern_flash_block(o, lse, q, k, v, q_pos, k_pos, nq, nk, H, Hkv, d, in_backward ? 0 : causal, scale, s);
}

#define cp_ulysses_backward cp_ulysses_backward_solution
#define kern_flash_block block_unmasked
#include "../../../solutions/10-context/context.c"
#undef kern_flash_block
#undef cp_ulysses_backward

void cp_ulysses_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *dout,
                         float *dq, float *dk, float *dv, pl_stream *s) {
    in_backward = 1;
    cp_ulysses_backward_solution(c, q, k, v, dout, dq, dk, dv, s);
    in_backward = 0;
}
