/* tp_linear.c - Lab 2 (reference solution): column- and row-parallel linear layers, forward
 * and backward, and the tensor-parallel MLP. The API, shapes and conventions are in
 * tp_linear.h; the pictures and the reasoning are in README.md.
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

static bool shape_is(pl_tensor t, int64_t rows, int64_t cols) {
    return t.rows == rows && t.cols == cols && (t.data != NULL || rows * cols == 0);
}

int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm) {
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (in <= 0 || out <= 0) return TP_ERR_SHAPE;
    int64_t split = kind == TP_COLUMN ? out : in;
    if (split % n != 0) return TP_ERR_NOT_DIVISIBLE;
    *l = (tp_linear){.kind = kind, .in = in, .out = out, .comm = comm};
    l->in_local = kind == TP_ROW ? in / n : in;
    l->out_local = kind == TP_COLUMN ? out / n : out;
    l->w = pl_tensor_alloc(l->out_local, l->in_local);
    l->dw = pl_tensor_alloc(l->out_local, l->in_local);
    pl_fill(l->dw.data, 0.0f, (size_t)pl_tensor_numel(l->dw), NULL);
    float bound = tp_init_bound(in);
    /* Column: our rows of W start at row r*out/n; row: our columns start at r*in/n. */
    int64_t row0 = kind == TP_COLUMN ? r * l->out_local : 0;
    int64_t col0 = kind == TP_ROW ? r * l->in_local : 0;
    pl_rng_fill(l->w, in, row0, col0, seed, id, PL_RNG_UNIFORM, -bound, bound);
    if (bias) {
        /* The column layer owns a slice of b; the row layer keeps all of it. */
        int64_t nb = kind == TP_COLUMN ? l->out_local : out;
        l->b = pl_malloc_floats((size_t)nb);
        l->db = pl_malloc_floats((size_t)nb);
        pl_fill(l->db, 0.0f, (size_t)nb, NULL);
        pl_rng_fill(pl_tensor_view(l->b, 1, nb), out, 0, kind == TP_COLUMN ? row0 : 0, seed, id + 1,
                    PL_RNG_UNIFORM, -bound, bound);
    }
    return TP_OK;
}

void tp_linear_free(tp_linear *l) {
    pl_tensor_free(&l->w);
    pl_tensor_free(&l->dw);
    pl_free(l->b);
    pl_free(l->db);
    l->b = l->db = NULL;
}

/* dst [T x n*c] = the n blocks [T x c] of `blocks` (rank r's block at r*T*c) side by side.
 * pl_allgather concatenates whole buffers, so the column blocks need re-arranging. */
static void scatter_blocks(pl_tensor dst, const float *blocks, int n, pl_stream *s) {
    int64_t c = dst.cols / n;
    for (int r = 0; r < n; r++)
        tp_copy_2d(pl_tensor_cols(dst, r * c, c), pl_tensor_view((float *)blocks + r * dst.rows * c, dst.rows, c), s);
}

/* All-gather this rank's [T x c] block into dst [T x n*c] (column order = rank order). */
static void gather_columns(pl_tensor dst, pl_tensor mine, pl_comm *comm, pl_stream *s) {
    int n = pl_comm_size(comm);
    size_t blk = (size_t)pl_tensor_numel(mine);
    float *send = pl_malloc_floats(blk), *all = pl_malloc_floats(blk * (size_t)n);
    tp_copy_2d(pl_tensor_view(send, mine.rows, mine.cols), mine, s);
    pl_allgather(send, all, blk, comm, s);
    scatter_blocks(dst, all, n, s);
    pl_stream_sync(s); /* the scratch buffers are freed next */
    pl_free(send);
    pl_free(all);
}

int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output,
                      pl_stream *s) {
    int64_t T = x.rows;
    if (!shape_is(x, T, l->in) || !shape_is(y, T, gather_output ? l->out : l->out_local)) return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    int n = pl_comm_size(l->comm), r = pl_comm_rank(l->comm);
    /* Our columns of y: y_r = x w^T (+ b_r), [T x out/n]. */
    pl_tensor yr = gather_output ? pl_tensor_cols(y, r * l->out_local, l->out_local) : y;
    pl_gemm(false, true, (int)T, (int)l->out_local, (int)l->in, 1.0f, x.data, (int)x.ld, l->w.data,
            (int)l->w.ld, 0.0f, yr.data, (int)yr.ld, s);
    if (l->b) tp_bias_add(yr, l->b, s);
    if (gather_output && n > 1) gather_columns(y, yr, l->comm, s);
    return TP_OK;
}

int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s) {
    int64_t T = x.rows;
    if (!shape_is(x, T, l->in) || !shape_is(dy, T, gather_output ? l->out : l->out_local) ||
        !shape_is(dx, T, l->in))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    int r = pl_comm_rank(l->comm);
    /* The all-gather's conjugate is a split: our columns of dy, no communication. */
    pl_tensor dyr = gather_output ? pl_tensor_cols(dy, r * l->out_local, l->out_local) : dy;
    /* dw_r += dy_r^T x   [out/n x T][T x in] */
    pl_gemm(true, false, (int)l->out_local, (int)l->in, (int)T, 1.0f, dyr.data, (int)dyr.ld, x.data,
            (int)x.ld, 1.0f, l->dw.data, (int)l->dw.ld, s);
    if (l->db) tp_bias_grad(l->db, dyr, s);
    /* dx = sum over ranks of dy_r w_r: the partial products of the identity's conjugate
     * (f: identity forward, all-reduce backward). */
    pl_tensor part = dx;
    float *tmp = NULL;
    if (!pl_tensor_contiguous(dx)) {
        tmp = pl_malloc_floats((size_t)(T * l->in));
        part = pl_tensor_view(tmp, T, l->in);
    }
    pl_gemm(false, false, (int)T, (int)l->in, (int)l->out_local, 1.0f, dyr.data, (int)dyr.ld, l->w.data,
            (int)l->w.ld, 0.0f, part.data, (int)part.ld, s);
    pl_allreduce(part.data, part.data, (size_t)(T * l->in), PL_SUM, l->comm, s);
    if (tmp) {
        tp_copy_2d(dx, part, s);
        pl_stream_sync(s);
        pl_free(tmp);
    }
    return TP_OK;
}

int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel,
                   pl_stream *s) {
    int64_t T = x.rows;
    if (!shape_is(x, T, input_is_parallel ? l->in_local : l->in) || !shape_is(y, T, l->out) ||
        !pl_tensor_contiguous(y))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    int r = pl_comm_rank(l->comm);
    pl_tensor xr = input_is_parallel ? x : pl_tensor_cols(x, r * l->in_local, l->in_local);
    /* Partial product y_r = x_r w_r^T [T x out]; the sum over ranks is y. */
    pl_gemm(false, true, (int)T, (int)l->out, (int)l->in_local, 1.0f, xr.data, (int)xr.ld, l->w.data,
            (int)l->w.ld, 0.0f, y.data, (int)y.ld, s);
    pl_allreduce(y.data, y.data, (size_t)(T * l->out), PL_SUM, l->comm, s);
    /* After the reduction, so the bias counts once and not n times. */
    if (l->b) tp_bias_add(y, l->b, s);
    return TP_OK;
}

int tp_row_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool input_is_parallel,
                    pl_stream *s) {
    int64_t T = x.rows, xin = input_is_parallel ? l->in_local : l->in;
    if (!shape_is(x, T, xin) || !shape_is(dy, T, l->out) || !shape_is(dx, T, xin)) return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    int n = pl_comm_size(l->comm), r = pl_comm_rank(l->comm);
    pl_tensor xr = input_is_parallel ? x : pl_tensor_cols(x, r * l->in_local, l->in_local);
    /* g's conjugate is the identity: dy is already whole on every rank. */
    pl_gemm(true, false, (int)l->out, (int)l->in_local, (int)T, 1.0f, dy.data, (int)dy.ld, xr.data,
            (int)xr.ld, 1.0f, l->dw.data, (int)l->dw.ld, s);
    if (l->db) tp_bias_grad(l->db, dy, s);
    /* dx_r = dy w_r  [T x out][out x in/n] */
    pl_tensor dxr = input_is_parallel ? dx : pl_tensor_cols(dx, r * l->in_local, l->in_local);
    pl_gemm(false, false, (int)T, (int)l->in_local, (int)l->out, 1.0f, dy.data, (int)dy.ld, l->w.data,
            (int)l->w.ld, 0.0f, dxr.data, (int)dxr.ld, s);
    /* The local split's conjugate: gather the other ranks' columns of dx. */
    if (!input_is_parallel && n > 1) gather_columns(dx, dxr, l->comm, s);
    return TP_OK;
}

int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id,
                pl_comm *comm) {
    int n = pl_comm_size(comm);
    if (d <= 0 || ffn <= 0 || max_tokens < 0) return TP_ERR_SHAPE;
    if (ffn % n != 0) return TP_ERR_NOT_DIVISIBLE;
    *m = (tp_mlp){.d = d, .ffn = ffn, .max_tokens = max_tokens};
    int rc = tp_linear_init(&m->fc1, TP_COLUMN, d, ffn, true, seed, id, comm);
    if (rc == TP_OK) rc = tp_linear_init(&m->fc2, TP_ROW, ffn, d, true, seed, id + 2, comm);
    if (rc != TP_OK) return rc;
    m->h = pl_tensor_alloc(max_tokens, ffn / n);
    m->a = pl_tensor_alloc(max_tokens, ffn / n);
    m->da = pl_tensor_alloc(max_tokens, ffn / n);
    return TP_OK;
}

void tp_mlp_free(tp_mlp *m) {
    tp_linear_free(&m->fc1);
    tp_linear_free(&m->fc2);
    pl_tensor_free(&m->h);
    pl_tensor_free(&m->a);
    pl_tensor_free(&m->da);
}

int tp_mlp_forward(tp_mlp *m, pl_tensor x, pl_tensor y, pl_stream *s) {
    int64_t T = x.rows;
    if (T > m->max_tokens || !shape_is(x, T, m->d) || !shape_is(y, T, m->d) || !pl_tensor_contiguous(y))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    pl_tensor h = pl_tensor_rows(m->h, 0, T), a = pl_tensor_rows(m->a, 0, T);
    /* column (no gather) -> gelu on our columns -> row (input already split): the only
     * communication is the row layer's all-reduce. */
    int rc = tp_column_forward(&m->fc1, x, h, false, s);
    if (rc != TP_OK) return rc;
    kern_gelu_forward(a.data, h.data, (size_t)pl_tensor_numel(h), s);
    return tp_row_forward(&m->fc2, a, y, true, s);
}

int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s) {
    int64_t T = x.rows;
    if (T > m->max_tokens || !shape_is(x, T, m->d) || !shape_is(dy, T, m->d) || !shape_is(dx, T, m->d))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    pl_tensor h = pl_tensor_rows(m->h, 0, T), a = pl_tensor_rows(m->a, 0, T), da = pl_tensor_rows(m->da, 0, T);
    int rc = tp_row_backward(&m->fc2, a, dy, da, true, s);
    if (rc != TP_OK) return rc;
    /* dh = gelu'(h) * da, written over a (gelu(h) is not needed any more). */
    kern_gelu_backward(a.data, da.data, h.data, (size_t)pl_tensor_numel(h), s);
    return tp_column_backward(&m->fc1, x, a, dx, false, s);
}
