// expect: wrong column.bwd.*
/* Broken on purpose: the column-parallel backward forgets the all-reduce of dx (the
 * conjugate of the identity before the layer), so each rank keeps only its partial sum. */
#define tp_column_backward tp_column_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_backward
int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s);

int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s) {
    int64_t T = x.rows;
    if (!shape_is(x, T, l->in) || !shape_is(dy, T, gather_output ? l->out : l->out_local) ||
        !shape_is(dx, T, l->in) || !pl_tensor_contiguous(dx))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    int r = pl_comm_rank(l->comm);
    pl_tensor dyr = gather_output ? pl_tensor_cols(dy, r * l->out_local, l->out_local) : dy;
    pl_gemm(true, false, (int)l->out_local, (int)l->in, (int)T, 1.0f, dyr.data, (int)dyr.ld, x.data,
            (int)x.ld, 1.0f, l->dw.data, (int)l->dw.ld, s);
    if (l->db) tp_bias_grad(l->db, dyr, s);
    pl_gemm(false, false, (int)T, (int)l->in, (int)l->out_local, 1.0f, dyr.data, (int)dyr.ld, l->w.data,
            (int)l->w.ld, 0.0f, dx.data, (int)dx.ld, s);
    /* the bug: no pl_allreduce of dx */
    return TP_OK;
}
