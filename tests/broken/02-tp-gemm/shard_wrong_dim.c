// expect: wrong column.fwd.*
/* Broken on purpose: the column-parallel layer splits W along its input dimension (the
 * row-parallel split) instead of its output dimension. */
#define tp_linear_init tp_linear_init_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_linear_init
int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm);

int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm) {
    if (kind == TP_ROW) return tp_linear_init_solution(l, kind, in, out, bias, seed, id, comm);
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (in % n != 0 || out % n != 0) return TP_ERR_NOT_DIVISIBLE;
    *l = (tp_linear){.kind = kind, .in = in, .out = out, .comm = comm};
    l->in_local = in / n; /* the bug: the input dimension is split */
    l->out_local = out;
    l->w = pl_tensor_alloc(l->out_local, l->in_local);
    l->dw = pl_tensor_alloc(l->out_local, l->in_local);
    pl_fill(l->dw.data, 0.0f, (size_t)pl_tensor_numel(l->dw), NULL);
    float bound = tp_init_bound(in);
    pl_rng_fill(l->w, in, 0, r * l->in_local, seed, id, PL_RNG_UNIFORM, -bound, bound);
    if (bias) {
        l->b = pl_malloc_floats((size_t)out);
        l->db = pl_malloc_floats((size_t)out);
        pl_fill(l->db, 0.0f, (size_t)out, NULL);
        pl_rng_fill(pl_tensor_view(l->b, 1, out), out, 0, 0, seed, id + 1, PL_RNG_UNIFORM, -bound, bound);
    }
    return TP_OK;
}
