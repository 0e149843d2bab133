// expect: full column.bwd.*
// np: 2
/* A correct alternative: the column-parallel backward overlaps the all-reduce of dx with
 * the weight gradient, issuing the all-reduce on the comm stream once dx's partial product
 * is there (an event) and making the caller's stream wait for it before returning (another
 * event). Whichever stream the caller passes, the comm stream or the default one, its next
 * work sees the sum. */
#define tp_column_backward tp_column_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_column_backward
int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s);

int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s) {
    int64_t T = x.rows;
    if (!pl_tensor_contiguous(dx) || T == 0 || !shape_is(x, T, l->in) ||
        !shape_is(dy, T, gather_output ? l->out : l->out_local) || !shape_is(dx, T, l->in))
        return tp_column_backward_solution(l, x, dy, dx, gather_output, s);
    int r = pl_comm_rank(l->comm);
    pl_tensor dyr = gather_output ? pl_tensor_cols(dy, r * l->out_local, l->out_local) : dy;
    /* dx's partial product first, so that its all-reduce overlaps the weight gradient */
    pl_gemm(false, false, (int)T, (int)l->in, (int)l->out_local, 1.0f, dyr.data, (int)dyr.ld, l->w.data,
            (int)l->w.ld, 0.0f, dx.data, (int)dx.ld, s);
    pl_event *ready = pl_event_create(), *done = pl_event_create();
    pl_event_record(ready, s);
    pl_stream_wait_event(pl_stream_comm(), ready);
    pl_allreduce(dx.data, dx.data, (size_t)(T * l->in), PL_SUM, l->comm, pl_stream_comm());
    pl_event_record(done, pl_stream_comm());
    pl_gemm(true, false, (int)l->out_local, (int)l->in, (int)T, 1.0f, dyr.data, (int)dyr.ld, x.data,
            (int)x.ld, 1.0f, l->dw.data, (int)l->dw.ld, s);
    if (l->db) tp_bias_grad(l->db, dyr, s);
    pl_stream_wait_event(s, done); /* the caller's stream sees the sum */
    pl_event_destroy(ready), pl_event_destroy(done);
    return TP_OK;
}
