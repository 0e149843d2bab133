// expect: wrong column.fwd.*
/* Broken on purpose: the column-parallel shard is read from the master as if W were
 * stored [in x out] (transposed), so w holds the wrong elements although its shape is
 * right. */
#define tp_linear_init tp_linear_init_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_linear_init
int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm);

int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm) {
    int rc = tp_linear_init_solution(l, kind, in, out, bias, seed, id, comm);
    if (rc != TP_OK || kind != TP_COLUMN) return rc;
    int r = pl_comm_rank(comm);
    float bound = tp_init_bound(in);
    /* the bug: element (i, j) of the shard taken from the [in x out] reading of the master */
    pl_rng_fill(pl_tensor_view(l->w.data, in, l->out_local), out, 0, r * l->out_local, seed, id,
                PL_RNG_UNIFORM, -bound, bound);
    return TP_OK;
}
