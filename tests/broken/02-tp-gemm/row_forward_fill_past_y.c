// expect: wrong row.fwd.*
/* Broken on purpose: the row layer's forward clears y first with one element too many.
 * The GEMM and the all-reduce overwrite y anyway, so every value is right; the float past
 * the end of y belongs to someone else. */
#define tp_row_forward tp_row_forward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_row_forward
int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel, pl_stream *s);

int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel, pl_stream *s) {
    if (y.data && y.rows == x.rows && y.cols == l->out && x.rows > 0)
        pl_fill(y.data, 0.0f, (size_t)(y.rows * y.cols) + 1, s); /* the bug: + 1 */
    return tp_row_forward_solution(l, x, y, input_is_parallel, s);
}
