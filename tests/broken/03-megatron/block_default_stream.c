// expect: wrong forward.nosp
/* Broken on purpose: the block's forward issues its work on the default stream (NULL)
 * whatever stream it is given: `s` is passed on to nothing. The caller's stream, when it
 * is another one, reads y before the block has computed it. */
#define mg_block_forward mg_block_forward_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_block_forward
void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y, const float *x, pl_stream *s);

void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y, const float *x, pl_stream *s) {
    (void)s;
    mg_block_forward_solution(c, p, a, y, x, NULL); /* the bug */
}
