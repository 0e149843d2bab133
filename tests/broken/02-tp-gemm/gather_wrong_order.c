// expect: wrong column.fwd.gather.*
/* Broken on purpose: gather_output copies the all-gathered buffer into y as it comes
 * (rank 0's [T x out/n] block, then rank 1's, ...) instead of placing each rank's block in
 * its columns: right only when there is one token. */
#define tp_column_forward tp_column_forward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_forward
int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output, pl_stream *s);

int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output, pl_stream *s) {
    if (!gather_output || pl_comm_size(l->comm) == 1) return tp_column_forward_solution(l, x, y, gather_output, s);
    int64_t T = x.rows;
    if (!shape_is(x, T, l->in) || !shape_is(y, T, l->out)) return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    size_t blk = (size_t)(T * l->out_local);
    float *mine = pl_malloc_floats(blk), *all = pl_malloc_floats(blk * (size_t)pl_comm_size(l->comm));
    pl_tensor yr = pl_tensor_view(mine, T, l->out_local);
    pl_gemm(false, true, (int)T, (int)l->out_local, (int)l->in, 1.0f, x.data, (int)x.ld, l->w.data,
            (int)l->w.ld, 0.0f, yr.data, (int)yr.ld, s);
    if (l->b) tp_bias_add(yr, l->b, s);
    pl_allgather(mine, all, blk, l->comm, s);
    tp_copy_2d(y, pl_tensor_view(all, T, l->out), s); /* the bug: blocks are not columns */
    pl_stream_sync(s);
    pl_free(mine);
    pl_free(all);
    return TP_OK;
}
