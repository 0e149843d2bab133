// expect: wrong error.shape.*_dy
/* Broken on purpose: the backwards check x and dx against the layer, and take dy on trust
 * ("it is the forward's y, so it has the right shape"): dy is read as the shape it should
 * have. A dy one column too wide goes into the GEMMs instead of TP_ERR_SHAPE (read with
 * the wrong columns; one too narrow, read past its end). */
#define tp_column_backward tp_column_backward_solution
#define tp_row_backward tp_row_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_backward
#undef tp_row_backward

int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output, pl_stream *s) {
    dy.rows = x.rows, dy.cols = gather_output ? l->out : l->out_local; /* the bug */
    return tp_column_backward_solution(l, x, dy, dx, gather_output, s);
}

int tp_row_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool input_is_parallel, pl_stream *s) {
    dy.rows = x.rows, dy.cols = l->out; /* the bug */
    return tp_row_backward_solution(l, x, dy, dx, input_is_parallel, s);
}
