// expect: wrong column.bwd.split.*
/* Broken on purpose: the column layer's backward reads dy as if it were dense (its width
 * as the leading dimension). Right for a contiguous dy; a model hands it a view of a wider
 * buffer (ld > cols), as the grader does. */
#define tp_column_backward tp_column_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_backward
int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output, pl_stream *s);

int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output, pl_stream *s) {
    dy.ld = dy.cols; /* the bug */
    return tp_column_backward_solution(l, x, dy, dx, gather_output, s);
}
