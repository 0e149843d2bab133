// expect: wrong row.fwd.*
/* Broken on purpose: the row-parallel layer adds its bias to the partial product on every
 * rank, before the all-reduce, so the output carries n times the bias. */
#define tp_row_forward tp_row_forward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_row_forward
int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel, pl_stream *s);

int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel, pl_stream *s) {
    int64_t T = x.rows;
    if (!shape_is(x, T, input_is_parallel ? l->in_local : l->in) || !shape_is(y, T, l->out) ||
        !pl_tensor_contiguous(y))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    int r = pl_comm_rank(l->comm);
    pl_tensor xr = input_is_parallel ? x : pl_tensor_cols(x, r * l->in_local, l->in_local);
    pl_gemm(false, true, (int)T, (int)l->out, (int)l->in_local, 1.0f, xr.data, (int)xr.ld, l->w.data,
            (int)l->w.ld, 0.0f, y.data, (int)y.ld, s);
    if (l->b) tp_bias_add(y, l->b, s); /* the bug: before the sum */
    pl_allreduce(y.data, y.data, (size_t)(T * l->out), PL_SUM, l->comm, s);
    return TP_OK;
}
