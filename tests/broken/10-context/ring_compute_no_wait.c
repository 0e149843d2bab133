// expect: wrong ring.*
/* Broken on purpose: the ring's compute runs on the other stream but never waits for the
 * event that marks its block's arrival: each step may compute from a buffer whose receive
 * has not run yet. On the cpu device's deferred streams (as on a GPU) the compute of a
 * block then reads what the buffer held before. The function is the solution's without that
 * one wait. */
#include "context.h"
#define cp_ring_forward cp_ring_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ring_forward

void cp_ring_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o, float *lse,
                     pl_stream *s) {
    cp_map m;
    map_make(c, &m);
    int n = m.n, me = m.me, H = c->heads, d = c->head_dim, next = (me + 1) % n, prev = (me - 1 + n) % n;
    size_t krow = (size_t)c->kv_heads * d, rows = (size_t)m.rows[me];
    pl_stream *cs = pl_stream_compute() == s ? pl_stream_comm() : pl_stream_compute();
    pl_event *ready = pl_event_create(), *done = pl_event_create(), *in[2], *used[2];
    float *kv[2][2] = {{NULL, NULL}, {NULL, NULL}};
    for (int b = 0; b < 2; b++) {
        in[b] = pl_event_create(), used[b] = pl_event_create();
        for (int j = 0; j < 2; j++) kv[b][j] = n > 1 ? pl_malloc_floats((size_t)m.maxrows * krow) : NULL;
    }
    float *ob = pl_malloc_floats(rows * H * d), *lb = pl_malloc_floats(rows * H);
    pl_event_record(ready, s); /* q, k, v as the caller left them on s */
    pl_stream_wait_event(cs, ready);
    pl_fill(o, 0.0f, rows * H * d, cs);
    pl_fill(lse, -INFINITY, rows * H, cs);
    const float *kc = k, *vc = v;
    for (int t = 0; t < n; t++) {
        int owner = (me - t + n) % n, incoming = (me - t - 1 + 2 * n) % n, b = t % 2;
        float *kn = kv[b][0], *vn = kv[b][1];
        if (t < n - 1) { /* the next block's exchange first: it overlaps this block's compute */
            size_t out = (size_t)m.rows[owner] * krow, inb = (size_t)m.rows[incoming] * krow;
            if (t >= 2) pl_stream_wait_event(s, used[b]); /* step t-1 computed from this buffer */
            pl_group_start();
            pl_send(kc, out, next, c->comm, s);
            pl_send(vc, out, next, c->comm, s);
            pl_recv(kn, inb, prev, c->comm, s);
            pl_recv(vn, inb, prev, c->comm, s);
            pl_group_end();
            pl_event_record(in[b], s);
        }
        compute_block(c, &m, owner, q, kc, vc, o, lse, ob, lb, cs);
        if (t >= 1) pl_event_record(used[1 - b], cs);
        kc = kn, vc = vn;
    }
    pl_event_record(done, cs);
    pl_stream_wait_event(s, done); /* o and lse are the caller's on s */
    pl_stream_sync(s);             /* the scratch below is freed at once */
    pl_free(ob);
    pl_free(lb);
    for (int b = 0; b < 2; b++) {
        for (int j = 0; j < 2; j++) pl_free(kv[b][j]);
        pl_event_destroy(in[b]), pl_event_destroy(used[b]);
    }
    pl_event_destroy(ready), pl_event_destroy(done);
    map_free(&m);
}
