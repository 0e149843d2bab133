// expect: wrong error.shape.column_forward
/* Broken on purpose: the column layer's forward checks x but not y. Given a y one column
 * too wide it computes into it and returns TP_OK instead of TP_ERR_SHAPE. */
#define tp_column_forward tp_column_forward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_forward
int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output, pl_stream *s);

int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output, pl_stream *s) {
    int64_t T = x.rows;
    if (!shape_is(x, T, l->in)) return TP_ERR_SHAPE;
    y.cols = gather_output ? l->out : l->out_local; /* the bug: whatever y is, use our width */
    return tp_column_forward_solution(l, x, y, gather_output, s);
}
