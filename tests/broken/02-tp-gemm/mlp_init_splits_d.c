// expect: wrong mlp.fwd.*
/* Broken on purpose: tp_mlp_init asks both dimensions to divide by the world size
 * ("everything is split n ways"), but the MLP splits only ffn: fc1's columns and fc2's
 * rows. A model whose d does not divide is turned away with TP_ERR_NOT_DIVISIBLE. */
#define tp_mlp_init tp_mlp_init_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_mlp_init
int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id, pl_comm *comm);

int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id, pl_comm *comm) {
    if (d > 0 && ffn > 0 && max_tokens >= 0 && d % pl_comm_size(comm) != 0) return TP_ERR_NOT_DIVISIBLE; /* the bug */
    return tp_mlp_init_solution(m, d, ffn, max_tokens, seed, id, comm);
}
