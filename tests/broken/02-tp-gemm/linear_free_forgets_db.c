// expect: pass column.fwd.*
// expect-perf: freed
/* Broken on purpose: tp_linear_free frees the shard, its gradient and the bias, and forgets
 * the bias gradient: every layer with a bias leaks it. */
#define tp_linear_free tp_linear_free_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_linear_free
void tp_linear_free(tp_linear *l);

void tp_linear_free(tp_linear *l) {
    pl_tensor_free(&l->w);
    pl_tensor_free(&l->dw);
    pl_free(l->b);
    l->b = l->db = NULL; /* the bug: l->db is never freed */
}
