// expect: wrong memory.z3
/* Broken on purpose: the forward "prefetches" by starting every unit's all-gather at once,
 * before unit 0, each into a buffer of its own: the order looks perfect, but every unit's
 * gathered parameters are alive at the same time. */
#define zero_pre_forward zero_pre_forward_solution
#define zero_post_forward zero_post_forward_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_pre_forward
#undef zero_post_forward
static void *g_all[ZERO_MAX_UNITS];
const void *zero_pre_forward(zero_state *z, int u) {
    ext *x = X(z);
    if (z->cfg.stage != 3) return zero_pre_forward_solution(z, u);
    const zero_model *m = z->model;
    if (u == 0) {
        comm_after_compute(x);
        for (int v = 0; v < m->nunits; v++) { /* the bug: all of them, now */
            unit3 *q = &x->u3[v];
            if (q->state != SHARDED) continue;
            g_all[v] = pl_malloc_tagged((size_t)z->world * q->S * x->es, PL_MEM_GATHER);
            if (x->es == 2) pl_allgather_bf16(q->param, g_all[v], q->S, z->comm, pl_stream_comm());
            else pl_allgather(q->param, g_all[v], q->S, z->comm, pl_stream_comm());
            q->state = GATHERING;
        }
        compute_after_comm(x);
    }
    unit3 *q = &x->u3[u];
    void *full = full_of(x, z, u);
    if (q->state == GATHERING && g_all[u]) {
        for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count; t++) {
            const zero_tensor *tt = &m->tensor[t];
            for (int r = 0; r < z->world; r++) {
                size_t first, held;
                zero_chunk(tt->dim0, z->world, r, &first, &held);
                pl_copy(at(full, tt->offset + first * tt->row, x->es), at(g_all[u], (size_t)r * q->S + q->toff[t], x->es),
                        held * tt->row * x->es, NULL);
            }
        }
        q->state = GATHERED;
    }
    return full;
}
void zero_post_forward(zero_state *z, int u) {
    zero_post_forward_solution(z, u);
    if (u == z->model->nunits - 1)
        for (int v = 0; v < z->model->nunits; v++) pl_free(g_all[v]), g_all[v] = NULL;
}
