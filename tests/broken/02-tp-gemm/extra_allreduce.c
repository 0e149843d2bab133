// expect: wrong row.fwd.*
/* Broken on purpose: the row-parallel forward all-reduces its (already identical) output a
 * second time "to be safe". The values stay right (max of equal values); the extra
 * collective doubles the layer's communication and the grader counts it. */
#define tp_row_forward tp_row_forward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_row_forward
int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel, pl_stream *s);

int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel, pl_stream *s) {
    int rc = tp_row_forward_solution(l, x, y, input_is_parallel, s);
    if (rc == TP_OK && x.rows > 0) pl_allreduce(y.data, y.data, (size_t)(x.rows * l->out), PL_MAX, l->comm, s);
    return rc;
}
