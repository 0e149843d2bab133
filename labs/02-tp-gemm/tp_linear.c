/* tp_linear.c - Lab 2: tensor-parallel (Megatron-style) linear layers and MLP.
 *
 * Implement the functions marked TODO (the API, the shapes of every argument and the
 * allowed harness calls are in tp_linear.h; the pictures are in README.md). Run
 * `make lab-2` to grade them. Until a function is implemented it returns
 * TP_ERR_NOT_IMPLEMENTED, and the grader reports its cases as failed without crashing.
 *
 * Shapes (n = pl_comm_size(comm), r = pl_comm_rank(comm), T tokens):
 *   master W [out x in], b [out];  y = x W^T + b
 *   column: w [out/n x in] = rows r*out/n.. of W;  b [out/n]
 *           forward  x [T x in] -> y [T x out] (gather_output) or [T x out/n]
 *           backward dy like y  -> dx [T x in] (all-reduce), dw += dy_r^T x, db += colsum dy_r
 *   row:    w [out x in/n] = columns r*in/n.. of W;  b [out] (whole, added after the sum)
 *           forward  x [T x in/n] (input_is_parallel) or [T x in] -> y [T x out] (all-reduce)
 *           backward dy [T x out] -> dx like x, dw += dy^T x_r, db += colsum dy
 *   mlp:    fc1 column [ffn x d] (no gather) -> gelu -> fc2 row [d x ffn] (input parallel)
 *
 * Harness calls you need: pl_gemm(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta,
 * C, ldc, stream) (row-major), pl_allreduce(send, recv, count, PL_SUM, comm, stream),
 * pl_allgather(send, recv, sendcount, comm, stream), pl_rng_fill(view, global_cols, row0,
 * col0, seed, id, PL_RNG_UNIFORM, lo, hi), pl_tensor_alloc/free, pl_tensor_rows/cols
 * views, pl_malloc_floats/pl_free, pl_fill, pl_stream_sync, tp_copy_2d, tp_bias_add,
 * tp_bias_grad, kern_gelu_forward/backward.
 */
#include <stddef.h>

#include "kern_gelu.h" // defines: kern_gelu_forward, kern_gelu_backward (tanh form)
#include "tp_linear.h" // defines: the lab API; brings in pl.h

const char *tp_error_name(int code) {
    switch (code) {
    case TP_OK: return "ok";
    case TP_ERR_NOT_DIVISIBLE: return "dimension not divisible by the world size";
    case TP_ERR_SHAPE: return "tensor shape does not match the layer";
    case TP_ERR_NOT_IMPLEMENTED: return "still the starter stub: write this function";
    default: return "unknown error";
    }
}

/* Check divisibility FIRST (return TP_ERR_NOT_DIVISIBLE before allocating anything), then
 * allocate w, dw (zeroed), b, db (zeroed) and fill w and b from the master with
 * pl_rng_fill: bound = tp_init_bound(in), weight tensor id `id`, bias id `id + 1`. */
int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm) {
    (void)l, (void)kind, (void)in, (void)out, (void)bias, (void)seed, (void)id, (void)comm;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

void tp_linear_free(tp_linear *l) {
    pl_tensor_free(&l->w);
    pl_tensor_free(&l->dw);
    pl_free(l->b);
    pl_free(l->db);
    l->b = l->db = NULL;
}

/* y_r = x w^T (+ b); with gather_output, all-gather the ranks' column blocks into y (mind
 * the layout: pl_allgather concatenates whole buffers, y's blocks are columns). */
int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output,
                      pl_stream *s) {
    (void)l, (void)x, (void)y, (void)gather_output, (void)s;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

/* dw += dy_r^T x, db += colsum(dy_r), dx = all-reduce of dy_r w (f's conjugate). */
int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s) {
    (void)l, (void)x, (void)dy, (void)dx, (void)gather_output, (void)s;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

/* y = all-reduce of x_r w^T, then + b once. */
int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel,
                   pl_stream *s) {
    (void)l, (void)x, (void)y, (void)input_is_parallel, (void)s;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

/* dw += dy^T x_r, db += colsum(dy), dx_r = dy w (all-gathered when the input was whole). */
int tp_row_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool input_is_parallel,
                    pl_stream *s) {
    (void)l, (void)x, (void)dy, (void)dx, (void)input_is_parallel, (void)s;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

/* fc1: tp_linear_init(TP_COLUMN, in d, out ffn, bias, seed, id); fc2: (TP_ROW, ffn, d,
 * bias, seed, id + 2); h, a, da: [max_tokens x ffn/n]. */
int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id,
                pl_comm *comm) {
    (void)m, (void)d, (void)ffn, (void)max_tokens, (void)seed, (void)id, (void)comm;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

void tp_mlp_free(tp_mlp *m) {
    tp_linear_free(&m->fc1);
    tp_linear_free(&m->fc2);
    pl_tensor_free(&m->h);
    pl_tensor_free(&m->a);
    pl_tensor_free(&m->da);
}

/* h = fc1(x) (split), a = gelu(h), y = fc2(a) (input parallel): one all-reduce. */
int tp_mlp_forward(tp_mlp *m, pl_tensor x, pl_tensor y, pl_stream *s) {
    (void)m, (void)x, (void)y, (void)s;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}

/* fc2 backward -> da, gelu backward with h, fc1 backward -> dx: one all-reduce. */
int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s) {
    (void)m, (void)x, (void)dy, (void)dx, (void)s;
    return TP_ERR_NOT_IMPLEMENTED; /* TODO */
}
