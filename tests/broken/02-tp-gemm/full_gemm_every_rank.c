// expect: wrong column.fwd.*
/* Broken on purpose: the column-parallel forward multiplies by the whole weight on every
 * rank (re-gathering it each call) and keeps its own columns: the output is right, but
 * each rank does the serial GEMM's flops instead of 1/n of them. */
#define tp_column_forward tp_column_forward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_forward
int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output, pl_stream *s);

int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output, pl_stream *s) {
    int n = pl_comm_size(l->comm), r = pl_comm_rank(l->comm);
    int64_t T = x.rows;
    if (n == 1 || gather_output) return tp_column_forward_solution(l, x, y, gather_output, s);
    if (!shape_is(x, T, l->in) || !shape_is(y, T, l->out_local)) return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    /* W [out x in] rebuilt locally (the shards are contiguous row blocks) */
    float *W = pl_malloc_floats((size_t)(l->out * l->in)), *yfull = pl_malloc_floats((size_t)(T * l->out));
    pl_allgather(l->w.data, W, (size_t)pl_tensor_numel(l->w), l->comm, s);
    pl_gemm(false, true, (int)T, (int)l->out, (int)l->in, 1.0f, x.data, (int)x.ld, W, (int)l->in, 0.0f, yfull,
            (int)l->out, s);
    tp_copy_2d(y, pl_tensor_cols(pl_tensor_view(yfull, T, l->out), r * l->out_local, l->out_local), s);
    if (l->b) tp_bias_add(y, l->b, s);
    pl_stream_sync(s);
    pl_free(W);
    pl_free(yfull);
    return TP_OK;
}
