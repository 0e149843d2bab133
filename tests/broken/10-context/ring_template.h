/* ring_template.h - the solution's cp_ring_forward with hooks, for the broken ring files:
 * a file includes the solution (with cp_ring_forward renamed), defines what it changes
 * and includes this. Hooks (defaults: the solution's):
 *   RING_COMPUTE   the function computing one block (compute_block)
 *   RING_NEXT/PREV where blocks go and come from
 *   RING_BUFFERS   receive buffers cycled through (2: double-buffered; 1: the block being
 *                  computed on is overwritten; n: every block kept, memory grows with S)
 *   RING_COMPUTE_FIRST  1: compute the block held, then post the exchange (no overlap)
 */
#ifndef RING_COMPUTE
#define RING_COMPUTE compute_block
#endif
#ifndef RING_NEXT
#define RING_NEXT(me, n) (((me) + 1) % (n))
#define RING_PREV(me, n) (((me) - 1 + (n)) % (n))
#endif
#ifndef RING_BUFFERS
#define RING_BUFFERS(n) 2
#endif
#ifndef RING_COMPUTE_FIRST
#define RING_COMPUTE_FIRST 0
#endif

void cp_ring_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o, float *lse,
                     pl_stream *s) {
    cp_map m;
    map_make(c, &m);
    int n = m.n, me = m.me, H = c->heads, d = c->head_dim, next = RING_NEXT(me, n), prev = RING_PREV(me, n);
    size_t krow = (size_t)c->kv_heads * d, rows = (size_t)m.rows[me];
    int nb = RING_BUFFERS(n);
    float **kv = malloc(2 * (size_t)nb * sizeof *kv);
    for (int b = 0; b < 2 * nb; b++) kv[b] = n > 1 ? pl_malloc_floats((size_t)m.maxrows * krow) : NULL;
    float *ob = pl_malloc_floats(rows * H * d), *lb = pl_malloc_floats(rows * H);
    pl_fill(o, 0.0f, rows * H * d, s);
    pl_fill(lse, -INFINITY, rows * H, s);
    const float *kc = k, *vc = v;
    for (int t = 0; t < n; t++) {
        int owner = (me - t + n) % n, incoming = (me - t - 1 + 2 * n) % n;
        float *kn = kv[2 * (t % nb)], *vn = kv[2 * (t % nb) + 1];
        if (RING_COMPUTE_FIRST) RING_COMPUTE(c, &m, owner, q, kc, vc, o, lse, ob, lb, s);
        if (t < n - 1) {
            size_t out = (size_t)m.rows[owner] * krow, in = (size_t)m.rows[incoming] * krow;
            pl_group_start();
            pl_send(kc, out, next, c->comm, s);
            pl_send(vc, out, next, c->comm, s);
            pl_recv(kn, in, prev, c->comm, s);
            pl_recv(vn, in, prev, c->comm, s);
            pl_group_end();
        }
        if (!RING_COMPUTE_FIRST) RING_COMPUTE(c, &m, owner, q, kc, vc, o, lse, ob, lb, s);
        kc = kn, vc = vn;
    }
    pl_stream_sync(s);
    pl_free(ob);
    pl_free(lb);
    for (int b = 0; b < 2 * nb; b++) pl_free(kv[b]);
    free(kv);
    map_free(&m);
}
