// expect: wrong error.shape.row_backward
/* Broken on purpose: the row layer's backward spots a dy of the wrong shape and refuses it,
 * but with -1, a code of its own, instead of TP_ERR_SHAPE: a caller that tests for
 * TP_ERR_SHAPE never learns what went wrong. */
#define tp_row_backward tp_row_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_row_backward

int tp_row_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool input_is_parallel, pl_stream *s) {
    int rc = tp_row_backward_solution(l, x, dy, dx, input_is_parallel, s);
    return rc == TP_ERR_SHAPE ? -1 : rc;
}
