// expect: wrong forward.nosp
/* Broken on purpose: the block's forward clears y first with one element too many. The
 * residual overwrites y anyway, so every value is right; the float past the end of y
 * belongs to someone else. */
#define mg_block_forward mg_block_forward_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_block_forward
void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y, const float *x, pl_stream *s);

void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y, const float *x, pl_stream *s) {
    dims d = dims_of(c);
    pl_fill(y, 0.0f, (size_t)d.Nl * d.C + 1, s); /* the bug: + 1 */
    mg_block_forward_solution(c, p, a, y, x, s);
}
