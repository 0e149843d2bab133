/* bwd_template.h - the solution's cp_ring_backward with hooks, for the broken backward
 * files: a file includes the solution (with cp_ring_backward renamed), defines what it
 * changes and includes this. Hooks (defaults: the solution's):
 *   BWD_COMPUTE      the function adding this rank's share of one block (backward_block)
 *   BWD_KEEP_INCOMING 0: the gradients that arrive with a block are zeroed before this
 *                    rank's share is added (overwritten instead of accumulated)
 *   BWD_SEND_HOME    0: no last exchange; each rank keeps the gradients it holds at the end
 */
#ifndef BWD_COMPUTE
#define BWD_COMPUTE backward_block
#endif
#ifndef BWD_KEEP_INCOMING
#define BWD_KEEP_INCOMING 1
#endif
#ifndef BWD_SEND_HOME
#define BWD_SEND_HOME 1
#endif

void cp_ring_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *dout, float *dq, float *dk, float *dv, pl_stream *s) {
    cp_map m;
    map_make(c, &m);
    int n = m.n, me = m.me, H = c->heads, d = c->head_dim, next = (me + 1) % n, prev = (me - 1 + n) % n;
    size_t krow = (size_t)c->kv_heads * d, rows = (size_t)m.rows[me], blk = (size_t)m.maxrows * krow;
    pl_fill(dq, 0.0f, rows * H * d, s);
    if (n == 1) {
        pl_fill(dk, 0.0f, rows * krow, s);
        pl_fill(dv, 0.0f, rows * krow, s);
        BWD_COMPUTE(c, &m, me, q, k, v, o, lse, dout, dq, dk, dv, s);
        map_free(&m);
        return;
    }
    float *kv[2][2], *acc[2][2];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 2; j++) kv[b][j] = pl_malloc_floats(blk), acc[b][j] = pl_malloc_floats(blk);
    pl_fill(acc[0][0], 0.0f, rows * krow, s);
    pl_fill(acc[0][1], 0.0f, rows * krow, s);
    const float *kc = k, *vc = v;
    for (int t = 0; t < n; t++) {
        int owner = (me - t + n) % n, incoming = (me - t - 1 + 2 * n) % n, last = (me - t + 1 + n) % n;
        float *kn = kv[t % 2][0], *vn = kv[t % 2][1], *dk_cur = acc[t % 2][0], *dv_cur = acc[t % 2][1];
        pl_group_start();
        if (t > 0) {
            size_t out = (size_t)m.rows[last] * krow, in = (size_t)m.rows[owner] * krow;
            pl_send(acc[(t + 1) % 2][0], out, next, c->comm, s);
            pl_send(acc[(t + 1) % 2][1], out, next, c->comm, s);
            pl_recv(dk_cur, in, prev, c->comm, s);
            pl_recv(dv_cur, in, prev, c->comm, s);
        }
        if (t < n - 1) {
            size_t out = (size_t)m.rows[owner] * krow, in = (size_t)m.rows[incoming] * krow;
            pl_send(kc, out, next, c->comm, s);
            pl_send(vc, out, next, c->comm, s);
            pl_recv(kn, in, prev, c->comm, s);
            pl_recv(vn, in, prev, c->comm, s);
        }
        pl_group_end();
        if (!BWD_KEEP_INCOMING) {
            pl_fill(dk_cur, 0.0f, (size_t)m.rows[owner] * krow, s);
            pl_fill(dv_cur, 0.0f, (size_t)m.rows[owner] * krow, s);
        }
        BWD_COMPUTE(c, &m, owner, q, kc, vc, o, lse, dout, dq, dk_cur, dv_cur, s);
        kc = kn, vc = vn;
    }
    if (BWD_SEND_HOME) {
        size_t out = (size_t)m.rows[next] * krow;
        pl_group_start();
        pl_send(acc[(n - 1) % 2][0], out, next, c->comm, s);
        pl_send(acc[(n - 1) % 2][1], out, next, c->comm, s);
        pl_recv(dk, rows * krow, prev, c->comm, s);
        pl_recv(dv, rows * krow, prev, c->comm, s);
        pl_group_end();
    } else { /* the gradients this rank holds at the end: the block of rank me + 1's */
        size_t have = (size_t)m.rows[next] < rows ? (size_t)m.rows[next] : rows;
        pl_fill(dk, 0.0f, rows * krow, s);
        pl_fill(dv, 0.0f, rows * krow, s);
        pl_copy(dk, acc[(n - 1) % 2][0], have * krow * sizeof(float), s);
        pl_copy(dv, acc[(n - 1) % 2][1], have * krow * sizeof(float), s);
    }
    pl_stream_sync(s);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 2; j++) pl_free(kv[b][j]), pl_free(acc[b][j]);
    map_free(&m);
}
