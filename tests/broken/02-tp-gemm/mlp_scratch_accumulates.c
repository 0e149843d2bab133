// expect: wrong mlp.bwd.steps2.*
/* Broken on purpose: the backward of fc2 adds its input gradient into the scratch da
 * (beta = 1: "gradients accumulate"), which only tp_mlp_init zeroes. One backward is right;
 * from the second micro-batch on, da still holds the first one's. */
#define tp_mlp_init tp_mlp_init_solution
#define tp_mlp_backward tp_mlp_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_mlp_init
#undef tp_mlp_backward
int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id, pl_comm *comm);
int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s);

int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id, pl_comm *comm) {
    int rc = tp_mlp_init_solution(m, d, ffn, max_tokens, seed, id, comm);
    if (rc == TP_OK) pl_fill(m->da.data, 0.0f, (size_t)pl_tensor_numel(m->da), NULL);
    return rc;
}

int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s) {
    int64_t T = x.rows;
    if (T > m->max_tokens || !shape_is(x, T, m->d) || !shape_is(dy, T, m->d) || !shape_is(dx, T, m->d))
        return TP_ERR_SHAPE;
    if (T == 0) return TP_OK;
    tp_linear *f2 = &m->fc2;
    pl_tensor h = pl_tensor_rows(m->h, 0, T), a = pl_tensor_rows(m->a, 0, T), da = pl_tensor_rows(m->da, 0, T);
    pl_gemm(true, false, (int)f2->out, (int)f2->in_local, (int)T, 1.0f, dy.data, (int)dy.ld, a.data, (int)a.ld, 1.0f,
            f2->dw.data, (int)f2->dw.ld, s);
    tp_bias_grad(f2->db, dy, s);
    pl_gemm(false, false, (int)T, (int)f2->in_local, (int)f2->out, 1.0f, dy.data, (int)dy.ld, f2->w.data, (int)f2->w.ld,
            1.0f /* the bug */, da.data, (int)da.ld, s);
    kern_gelu_backward(a.data, da.data, h.data, (size_t)pl_tensor_numel(h), s);
    return tp_column_backward(&m->fc1, x, a, dx, false, s);
}
