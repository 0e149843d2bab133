// expect: deadlock alltoallv.random
/* Broken on purpose: the pairwise exchange sends, then receives, outside a group. Sends are
 * rendezvous (NCCL semantics): every rank waits in its send for a receive nobody posts. */
#include "moe.h"
#define moe_alltoallv moe_alltoallv_solution
#include "../../../solutions/09-moe/moe_layer.c"
#undef moe_alltoallv
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

void moe_alltoallv(const float *send, const int *send_counts, float *recv, const int *recv_counts, pl_comm *comm,
                   pl_stream *s) {
    int n = pl_comm_size(comm), me = pl_comm_rank(comm);
    size_t so[64] = {0}, ro[64] = {0};
    for (int p = 1; p < n && p < 64; p++) so[p] = so[p - 1] + (size_t)send_counts[p - 1], ro[p] = ro[p - 1] + (size_t)recv_counts[p - 1];
    pl_copy(recv + ro[me], send + so[me], (size_t)send_counts[me] * sizeof(float), s);
    for (int i = 1; i < n; i++) {
        int to = (me + i) % n, from = (me - i + n) % n;
        pl_send(send + so[to], (size_t)send_counts[to], to, comm, s); /* the bug: no group */
        pl_recv(recv + ro[from], (size_t)recv_counts[from], from, comm, s);
    }
}
