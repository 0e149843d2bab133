// expect: wrong error.shape.mlp_backward_tokens
/* Broken on purpose: the MLP's backward checks the tensors' widths and takes the token
 * count on trust ("the forward already checked T against max_tokens"). A backward of more
 * tokens than the scratch holds runs its GEMMs past h, a and da instead of returning
 * TP_ERR_SHAPE. */
#define tp_mlp_backward tp_mlp_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_mlp_backward
int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s);

int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s) {
    int64_t keep = m->max_tokens;
    m->max_tokens = x.rows > keep ? x.rows : keep; /* the bug: no check of T */
    int rc = tp_mlp_backward_solution(m, x, dy, dx, s);
    m->max_tokens = keep;
    return rc;
}
