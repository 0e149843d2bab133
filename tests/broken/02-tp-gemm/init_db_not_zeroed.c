// expect: wrong column.fwd.*
/* Broken on purpose: init zeroes the weight gradient but only allocates the bias gradient
 * (a fresh allocation is "probably zero"). The first backward then adds to whatever the
 * allocator left there: on a GPU, last step's memory; in a checked run, NaN. */
#define tp_linear_init tp_linear_init_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_linear_init
int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed, uint64_t id,
                   pl_comm *comm);

int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed, uint64_t id,
                   pl_comm *comm) {
    int rc = tp_linear_init_solution(l, kind, in, out, bias, seed, id, comm);
    if (rc == TP_OK && l->db) { /* the bug: db as the allocator returns it */
        pl_free(l->db);
        l->db = pl_malloc_floats((size_t)(kind == TP_COLUMN ? l->out_local : out));
    }
    return rc;
}
