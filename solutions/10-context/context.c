/* context.c - Lab 10 (solution): the online-softmax merge, the token layouts, ring
 * attention forward and backward (contiguous or zig-zag, causal blocks skipped, the next
 * block's exchange posted before the current block's compute) and Ulysses. */
#include "context.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_flash.h"  // defines: kern_flash_block, kern_flash_merge
#include "kern_gather.h" // defines: kern_gather_rows

/* ---- the merge (host) --------------------------------------------------------------- */

void cp_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d) {
    for (int r = 0; r < rows; r++) {
        float a = lse[r], b = lse_blk[r];
        float *oi = o + (size_t)r * d;
        const float *bi = o_blk + (size_t)r * d;
        if (b == -INFINITY) continue;
        if (a == -INFINITY) {
            memcpy(oi, bi, (size_t)d * sizeof(float));
            lse[r] = b;
            continue;
        }
        float m = fmaxf(a, b), wa = expf(a - m), wb = expf(b - m), sum = wa + wb;
        for (int i = 0; i < d; i++) oi[i] = (wa * oi[i] + wb * bi[i]) / sum;
        lse[r] = m + logf(sum);
    }
}

/* ---- layouts ------------------------------------------------------------------------ */

static int chunks_of(const cp_config *c, int n) { return c->layout == CP_ZIGZAG ? 2 * n : n; }
static int chunk_len(int S, int C, int i) { return S / C + (i < S % C); }
static int chunk_start(int S, int C, int i) { return i * (S / C) + (i < S % C ? i : S % C); }

/* The chunks rank r holds, in local order; returns how many (1 or 2). */
static int chunks_of_rank(const cp_config *c, int n, int r, int out[2]) {
    out[0] = r;
    if (c->layout != CP_ZIGZAG) return 1;
    out[1] = 2 * n - 1 - r;
    return 2;
}

int cp_positions(const cp_config *c, int rank, int *pos) {
    int n = pl_comm_size(c->comm), C = chunks_of(c, n), ch[2], m = chunks_of_rank(c, n, rank, ch), k = 0;
    for (int i = 0; i < m; i++)
        for (int t = 0; t < chunk_len(c->seq, C, ch[i]); t++) pos[k++] = chunk_start(c->seq, C, ch[i]) + t;
    return k;
}

/* ---- the configuration -------------------------------------------------------------- */

int cp_config_check(const cp_config *c, int ulysses) {
    int n = pl_comm_size(c->comm);
    /* every rank's fields, max and min (max of the negated): a rank that differs makes
     * every rank say so */
    enum { NF = 6 };
    float v[2 * NF] = {(float)c->seq, (float)c->heads, (float)c->kv_heads, (float)c->head_dim, (float)c->causal,
                       (float)c->layout};
    for (int i = 0; i < NF; i++) v[NF + i] = -v[i];
    float *buf = pl_malloc_floats(2 * NF);
    pl_upload(buf, v, sizeof v);
    pl_allreduce(buf, buf, 2 * NF, PL_MAX, c->comm, NULL);
    float m[2 * NF];
    pl_download(m, buf, sizeof m);
    pl_free(buf);
    for (int i = 0; i < NF; i++)
        if (m[i] != -m[NF + i]) return CP_ERR_MISMATCH;
    if (c->seq < 1 || c->heads < 1 || c->kv_heads < 1 || c->head_dim < 1 || c->heads % c->kv_heads != 0 ||
        (c->causal != 0 && c->causal != 1) || (c->layout != CP_CONTIGUOUS && c->layout != CP_ZIGZAG) ||
        c->seq < chunks_of(c, n))
        return CP_ERR_SHAPE;
    if (ulysses && (c->heads % n != 0 || c->kv_heads % n != 0)) return CP_ERR_HEADS;
    return CP_OK;
}

/* ---- what every rank knows of every rank's tokens ------------------------------------ */

typedef struct {
    int n, me, S, maxrows;
    int *rows, *off; /* [n]: each rank's local tokens, and where they start in the gathered order */
    int *pos_h;      /* [S] host: every rank's positions, rank after rank                  */
    int *pos_d;      /* [S] device copy                                                     */
} cp_map;

static void map_make(const cp_config *c, cp_map *m) {
    m->n = pl_comm_size(c->comm), m->me = pl_comm_rank(c->comm), m->S = c->seq, m->maxrows = 0;
    m->rows = malloc(2 * (size_t)m->n * sizeof(int));
    m->off = m->rows + m->n;
    m->pos_h = malloc((size_t)(m->S + 2 * m->n + 2) * sizeof(int));
    int at = 0;
    for (int r = 0; r < m->n; r++) {
        m->off[r] = at;
        m->rows[r] = cp_positions(c, r, m->pos_h + at);
        at += m->rows[r];
        if (m->rows[r] > m->maxrows) m->maxrows = m->rows[r];
    }
    m->pos_d = pl_malloc((size_t)m->S * sizeof(int));
    pl_upload(m->pos_d, m->pos_h, (size_t)m->S * sizeof(int));
}

static void map_free(cp_map *m) {
    pl_free(m->pos_d);
    free(m->pos_h);
    free(m->rows);
}

/* ---- ring attention ----------------------------------------------------------------- */

/* Does any query of chunk qc see any key of chunk kc? (causal: the first key is not after
 * the last query) */
static bool chunk_pair_needed(const cp_config *c, int C, int qc, int kc) {
    if (!c->causal) return true;
    return chunk_start(c->seq, C, kc) <= chunk_start(c->seq, C, qc) + chunk_len(c->seq, C, qc) - 1;
}

/* The rows of this rank's queries and of `owner`'s keys that the block needs: with two
 * chunks a side the needed chunk pairs always form one run of query chunks against one run
 * of key chunks (its own block: whole). False when none is needed (above the diagonal). */
static bool block_runs(const cp_config *c, const cp_map *m, int owner, int *qoff, int *nq, int *koff, int *nk) {
    int n = m->n, C = chunks_of(c, n);
    int qch[2], kch[2], nqc = chunks_of_rank(c, n, m->me, qch), nkc = chunks_of_rank(c, n, owner, kch);
    if (owner == m->me) {
        *qoff = 0, *koff = 0, *nq = m->rows[m->me], *nk = m->rows[owner];
        return true;
    }
    int q0 = -1, q1 = -1, k0 = -1, k1 = -1;
    for (int a = 0; a < nqc; a++)
        for (int b = 0; b < nkc; b++)
            if (chunk_pair_needed(c, C, qch[a], kch[b])) {
                if (q0 < 0 || a < q0) q0 = a;
                if (a > q1) q1 = a;
                if (k0 < 0 || b < k0) k0 = b;
                if (b > k1) k1 = b;
            }
    if (q0 < 0) return false;
    *qoff = 0, *koff = 0, *nq = 0, *nk = 0;
    for (int a = 0; a < q0; a++) *qoff += chunk_len(c->seq, C, qch[a]);
    for (int a = q0; a <= q1; a++) *nq += chunk_len(c->seq, C, qch[a]);
    for (int b = 0; b < k0; b++) *koff += chunk_len(c->seq, C, kch[b]);
    for (int b = k0; b <= k1; b++) *nk += chunk_len(c->seq, C, kch[b]);
    return true;
}

/* This rank's queries against the block of rank `owner` (kb, vb), merged into (o, lse). */
static void compute_block(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                          const float *vb, float *o, float *lse, float *ob, float *lb, pl_stream *s) {
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, qoff, nq, koff, nk;
    if (!block_runs(c, m, owner, &qoff, &nq, &koff, &nk)) return;
    size_t qrow = (size_t)H * d, krow = (size_t)Hkv * d;
    kern_flash_block(ob, lb, q + qoff * qrow, kb + koff * krow, vb + koff * krow, m->pos_d + m->off[m->me] + qoff,
                     m->pos_d + m->off[owner] + koff, nq, nk, H, Hkv, d, c->causal, 1.0f / sqrtf((float)d), s);
    kern_flash_merge(o + qoff * qrow, lse + (size_t)qoff * H, ob, lb, nq * H, d, s);
}

/* The exchange runs on the caller's stream s, the blocks' compute on the other stream, so
 * that on a GPU the next block's transfer hides under this block's compute. Events order
 * them: a block is computed once its exchange is in (in[b]), and a buffer is received into
 * again only once the compute that read it is done (used[b]). */
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
        if (t >= 1) pl_stream_wait_event(cs, in[1 - b]); /* the block received in step t-1 */
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

/* This rank's queries' share of the gradients of the block of rank `owner`: dq here, dkb
 * and dvb (the block's accumulators, travelling with it). */
static void backward_block(const cp_config *c, const cp_map *m, int owner, const float *q, const float *kb,
                           const float *vb, const float *o, const float *lse, const float *dout, float *dq, float *dkb,
                           float *dvb, pl_stream *s) {
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, qoff, nq, koff, nk;
    if (!block_runs(c, m, owner, &qoff, &nq, &koff, &nk)) return;
    size_t qrow = (size_t)H * d, krow = (size_t)Hkv * d;
    kern_flash_block_backward(dq + qoff * qrow, dkb + koff * krow, dvb + koff * krow, q + qoff * qrow, kb + koff * krow,
                              vb + koff * krow, o + qoff * qrow, lse + (size_t)qoff * H, dout + qoff * qrow,
                              m->pos_d + m->off[m->me] + qoff, m->pos_d + m->off[owner] + koff, nq, nk, H, Hkv, d,
                              c->causal, 1.0f / sqrtf((float)d), s);
}

void cp_ring_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *dout, float *dq, float *dk, float *dv, pl_stream *s) {
    cp_map m;
    map_make(c, &m);
    int n = m.n, me = m.me, H = c->heads, d = c->head_dim, next = (me + 1) % n, prev = (me - 1 + n) % n;
    size_t krow = (size_t)c->kv_heads * d, rows = (size_t)m.rows[me], blk = (size_t)m.maxrows * krow;
    pl_fill(dq, 0.0f, rows * H * d, s);
    if (n == 1) { /* one block, its gradients straight into dk and dv */
        pl_fill(dk, 0.0f, rows * krow, s);
        pl_fill(dv, 0.0f, rows * krow, s);
        backward_block(c, &m, me, q, k, v, o, lse, dout, dq, dk, dv, s);
        map_free(&m);
        return;
    }
    /* kv[b]: a received K/V block; acc[b]: a block's dK/dV accumulator; both double-buffered */
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
        if (t > 0) { /* the previous block's gradients on, this block's in */
            size_t out = (size_t)m.rows[last] * krow, in = (size_t)m.rows[owner] * krow;
            pl_send(acc[(t + 1) % 2][0], out, next, c->comm, s);
            pl_send(acc[(t + 1) % 2][1], out, next, c->comm, s);
            pl_recv(dk_cur, in, prev, c->comm, s);
            pl_recv(dv_cur, in, prev, c->comm, s);
        }
        if (t < n - 1) { /* the next block's K and V, before this block's compute */
            size_t out = (size_t)m.rows[owner] * krow, in = (size_t)m.rows[incoming] * krow;
            pl_send(kc, out, next, c->comm, s);
            pl_send(vc, out, next, c->comm, s);
            pl_recv(kn, in, prev, c->comm, s);
            pl_recv(vn, in, prev, c->comm, s);
        }
        pl_group_end();
        backward_block(c, &m, owner, q, kc, vc, o, lse, dout, dq, dk_cur, dv_cur, s);
        kc = kn, vc = vn;
    }
    /* the last block's gradients home (to its owner, me + 1); this rank's from me - 1 */
    size_t out = (size_t)m.rows[next] * krow;
    pl_group_start();
    pl_send(acc[(n - 1) % 2][0], out, next, c->comm, s);
    pl_send(acc[(n - 1) % 2][1], out, next, c->comm, s);
    pl_recv(dk, rows * krow, prev, c->comm, s);
    pl_recv(dv, rows * krow, prev, c->comm, s);
    pl_group_end();
    pl_stream_sync(s);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 2; j++) pl_free(kv[b][j]), pl_free(acc[b][j]);
    map_free(&m);
}

/* ---- Ulysses ------------------------------------------------------------------------ */

/* One all-to-all from point-to-point calls over comm (this rank me of n): send block p
 * (send_rows[p] rows of width floats at send + soff[p] rows) to rank p, receive block p
 * into recv + roff[p] rows. */
static void alltoall_rows_in(const float *send, const int *send_rows, const int *soff, float *recv, const int *recv_rows,
                             const int *roff, size_t width, int me, int n, pl_comm *comm, pl_stream *s) {
    pl_copy(recv + (size_t)roff[me] * width, send + (size_t)soff[me] * width, (size_t)send_rows[me] * width * sizeof(float),
            s);
    pl_group_start();
    for (int p = 0; p < n; p++) {
        if (p == me) continue;
        pl_send(send + (size_t)soff[p] * width, (size_t)send_rows[p] * width, p, comm, s);
        pl_recv(recv + (size_t)roff[p] * width, (size_t)recv_rows[p] * width, p, comm, s);
    }
    pl_group_end();
}

/* What both directions of Ulysses share: the map, the group the all-to-alls run in (the
 * world, or a row of the 2-D grid: consecutive ranks), and the row orders of the packing.
 * A rank's tokens [rows, Hx, d] seen as [rows * gn, Hx/gn * d]: row t * gn + p is token t's
 * heads of the group's member p. */
typedef struct {
    cp_map m;
    int gn, gme, gS; /* the group's size, this rank's place in it, its gathered tokens       */
    pl_comm *gcomm;
    int *grows, *goff; /* [gn] each member's tokens and where they start in the gathered order */
    const int *gpos;   /* device: the gathered sequence's positions                            */
    int rows, *mine, *moff; /* this rank's rows to / from every member, and their offsets     */
    int *to, *from;         /* device [rows * gn]: the orders of kern_gather_rows out and back */
    float *pack;            /* [gn][rows][Hx/gn * d]: what goes to or comes from each member   */
} uly_plan;

/* The group of gn ranks from world rank `first` on, over gcomm (this rank at gme). */
static void uly_make_group(const cp_config *c, uly_plan *u, int gn, int gme, pl_comm *gcomm, int first) {
    map_make(c, &u->m);
    u->gn = gn, u->gme = gme, u->gcomm = gcomm, u->gS = 0;
    int rows = u->rows = u->m.rows[u->m.me];
    u->mine = malloc(4 * (size_t)gn * sizeof(int));
    u->moff = u->mine + gn, u->grows = u->moff + gn, u->goff = u->grows + gn;
    for (int p = 0; p < gn; p++) {
        u->grows[p] = u->m.rows[first + p], u->goff[p] = u->gS;
        u->gS += u->grows[p];
    }
    u->gpos = u->m.pos_d + u->m.off[first];
    int *h = malloc(2 * (size_t)rows * gn * sizeof(int) + 1);
    for (int p = 0; p < gn; p++) {
        u->mine[p] = rows, u->moff[p] = p * rows;
        for (int t = 0; t < rows; t++) h[p * rows + t] = t * gn + p, h[rows * gn + t * gn + p] = p * rows + t;
    }
    u->to = pl_malloc(2 * (size_t)rows * gn * sizeof(int) + 1);
    u->from = u->to + (size_t)rows * gn;
    pl_upload(u->to, h, 2 * (size_t)rows * gn * sizeof(int));
    free(h);
    u->pack = pl_malloc_floats((size_t)rows * c->heads * c->head_dim); /* the widest: H heads */
}

static void uly_make(const cp_config *c, uly_plan *u) {
    uly_make_group(c, u, pl_comm_size(c->comm), pl_comm_rank(c->comm), c->comm, 0);
}

static void uly_free(uly_plan *u, pl_stream *s) {
    pl_stream_sync(s);
    pl_free(u->pack);
    pl_free(u->to);
    free(u->mine);
    map_free(&u->m);
}

/* src [rows, Hx, d] of this rank -> dst [gS, Hx/gn, d]: the group's tokens, this rank's heads */
static void uly_to_heads(const cp_config *c, uly_plan *u, const float *src, int Hx, float *dst, pl_stream *s) {
    size_t w = (size_t)(Hx / u->gn) * c->head_dim;
    kern_gather_rows(u->pack, src, u->to, u->rows * u->gn, (int)w, s);
    alltoall_rows_in(u->pack, u->mine, u->moff, dst, u->grows, u->goff, w, u->gme, u->gn, u->gcomm, s);
}

/* src [gS, Hx/gn, d] -> dst [rows, Hx, d]: member p's tokens of these heads go back to p */
static void uly_from_heads(const cp_config *c, uly_plan *u, const float *src, int Hx, float *dst, pl_stream *s) {
    size_t w = (size_t)(Hx / u->gn) * c->head_dim;
    alltoall_rows_in(src, u->grows, u->goff, u->pack, u->mine, u->moff, w, u->gme, u->gn, u->gcomm, s);
    kern_gather_rows(dst, u->pack, u->from, u->rows * u->gn, (int)w, s);
}

void cp_ulysses_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o,
                        pl_stream *s) {
    uly_plan u;
    uly_make(c, &u);
    int n = u.m.n, S = c->seq, d = c->head_dim, H = c->heads, Hkv = c->kv_heads;
    size_t wq = (size_t)(H / n) * d, wk = (size_t)(Hkv / n) * d;
    float *qg = pl_malloc_floats((size_t)S * wq), *kg = pl_malloc_floats((size_t)S * wk),
          *vg = pl_malloc_floats((size_t)S * wk), *og = pl_malloc_floats((size_t)S * wq),
          *lg = pl_malloc_floats((size_t)S * (H / n));
    uly_to_heads(c, &u, q, H, qg, s);
    uly_to_heads(c, &u, k, Hkv, kg, s);
    uly_to_heads(c, &u, v, Hkv, vg, s);
    kern_flash_block(og, lg, qg, kg, vg, u.m.pos_d, u.m.pos_d, S, S, H / n, Hkv / n, d, c->causal,
                     1.0f / sqrtf((float)d), s);
    uly_from_heads(c, &u, og, H, o, s);
    uly_free(&u, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(og), pl_free(lg);
}

/* The backward keeps nothing from the forward: q, k, v and dout go to the head split (four
 * all-to-alls), the attention of this rank's heads is recomputed there for its (o, lse),
 * its backward runs over the whole sequence, and dq, dk, dv come back (three). */
void cp_ulysses_backward(const cp_config *c, const float *q, const float *k, const float *v, const float *dout,
                         float *dq, float *dk, float *dv, pl_stream *s) {
    uly_plan u;
    uly_make(c, &u);
    int n = u.m.n, S = c->seq, d = c->head_dim, H = c->heads, Hkv = c->kv_heads;
    size_t wq = (size_t)(H / n) * d, wk = (size_t)(Hkv / n) * d;
    float *qg = pl_malloc_floats((size_t)S * wq), *kg = pl_malloc_floats((size_t)S * wk),
          *vg = pl_malloc_floats((size_t)S * wk), *gg = pl_malloc_floats((size_t)S * wq),
          *og = pl_malloc_floats((size_t)S * wq), *lg = pl_malloc_floats((size_t)S * (H / n)),
          *dqg = pl_malloc_floats((size_t)S * wq), *dkg = pl_malloc_floats((size_t)S * wk),
          *dvg = pl_malloc_floats((size_t)S * wk);
    uly_to_heads(c, &u, q, H, qg, s);
    uly_to_heads(c, &u, k, Hkv, kg, s);
    uly_to_heads(c, &u, v, Hkv, vg, s);
    uly_to_heads(c, &u, dout, H, gg, s);
    float scale = 1.0f / sqrtf((float)d);
    kern_flash_block(og, lg, qg, kg, vg, u.m.pos_d, u.m.pos_d, S, S, H / n, Hkv / n, d, c->causal, scale, s);
    pl_fill(dqg, 0.0f, (size_t)S * wq, s);
    pl_fill(dkg, 0.0f, (size_t)S * wk, s);
    pl_fill(dvg, 0.0f, (size_t)S * wk, s);
    kern_flash_block_backward(dqg, dkg, dvg, qg, kg, vg, og, lg, gg, u.m.pos_d, u.m.pos_d, S, S, H / n, Hkv / n, d,
                              c->causal, scale, s);
    uly_from_heads(c, &u, dqg, H, dq, s);
    uly_from_heads(c, &u, dkg, Hkv, dk, s);
    uly_from_heads(c, &u, dvg, Hkv, dv, s);
    uly_free(&u, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(gg), pl_free(og), pl_free(lg);
    pl_free(dqg), pl_free(dkg), pl_free(dvg);
}

/* ---- 2-D: Ulysses within rows of the grid, the ring across them ----------------------- */

/* Rank me = g * u + j: row g of the grid (u consecutive ranks) runs Ulysses, so that rank j
 * of the row holds the row's tokens for heads [j H/u, (j+1) H/u); the ranks with the same j
 * (one per row: a column) run the ring over the rows' gathered blocks. A block entirely
 * after this row's last token (causal) is skipped. */
typedef struct {
    int ud, r, g, maxS;
    pl_comm *row, *col;
    uly_plan u;      /* the row's all-to-alls */
    int *gS, *lo, *hi; /* [r] every row's gathered tokens, their first and last position */
} usp_grid;

static void grid_make(const cp_config *c, int ud, usp_grid *G) {
    int n = pl_comm_size(c->comm), me = pl_comm_rank(c->comm), j = me % ud;
    G->ud = ud, G->r = n / ud, G->g = me / ud, G->maxS = 0;
    G->row = pl_comm_split(c->comm, G->g, j), G->col = pl_comm_split(c->comm, j, G->g);
    uly_make_group(c, &G->u, ud, j, G->row, G->g * ud);
    G->gS = malloc(3 * (size_t)G->r * sizeof(int)), G->lo = G->gS + G->r, G->hi = G->lo + G->r;
    for (int x = 0; x < G->r; x++) {
        G->gS[x] = 0, G->lo[x] = c->seq, G->hi[x] = -1;
        for (int i = 0; i < ud; i++) G->gS[x] += G->u.m.rows[x * ud + i];
        for (int t = 0; t < G->gS[x]; t++) {
            int p = G->u.m.pos_h[G->u.m.off[x * ud] + t];
            if (p < G->lo[x]) G->lo[x] = p;
            if (p > G->hi[x]) G->hi[x] = p;
        }
        if (G->gS[x] > G->maxS) G->maxS = G->gS[x];
    }
}

static void grid_free(usp_grid *G, pl_stream *s) {
    uly_free(&G->u, s);
    free(G->gS);
    pl_comm_free(G->row);
    pl_comm_free(G->col);
}

static const int *grid_pos(const usp_grid *G, int x) { return G->u.m.pos_d + G->u.m.off[x * G->ud]; }
static bool grid_needed(const cp_config *c, const usp_grid *G, int x) { return !c->causal || G->lo[x] <= G->hi[G->g]; }

/* The column's ring: (og, lg) [gS, H/u] of this row's queries against every row's keys. */
static void col_ring_forward(const cp_config *c, usp_grid *G, const float *qg, const float *kg, const float *vg,
                             float *og, float *lg, pl_stream *s) {
    int r = G->r, g = G->g, Hu = c->heads / G->ud, Hkvu = c->kv_heads / G->ud, d = c->head_dim, mine = G->gS[g];
    size_t wq = (size_t)Hu * d, wk = (size_t)Hkvu * d;
    float *ob = pl_malloc_floats((size_t)mine * wq), *lb = pl_malloc_floats((size_t)mine * Hu), *kv[2][2];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) kv[b][i] = pl_malloc_floats((size_t)G->maxS * wk);
    pl_fill(og, 0.0f, (size_t)mine * wq, s);
    pl_fill(lg, -INFINITY, (size_t)mine * Hu, s);
    const float *kc = kg, *vc = vg;
    for (int t = 0; t < r; t++) {
        int owner = (g - t + r) % r, incoming = (g - t - 1 + 2 * r) % r;
        float *kn = kv[t % 2][0], *vn = kv[t % 2][1];
        if (t < r - 1) {
            pl_group_start();
            pl_send(kc, (size_t)G->gS[owner] * wk, (g + 1) % r, G->col, s);
            pl_send(vc, (size_t)G->gS[owner] * wk, (g + 1) % r, G->col, s);
            pl_recv(kn, (size_t)G->gS[incoming] * wk, (g - 1 + r) % r, G->col, s);
            pl_recv(vn, (size_t)G->gS[incoming] * wk, (g - 1 + r) % r, G->col, s);
            pl_group_end();
        }
        if (grid_needed(c, G, owner)) {
            kern_flash_block(ob, lb, qg, kc, vc, grid_pos(G, g), grid_pos(G, owner), mine, G->gS[owner], Hu, Hkvu, d,
                             c->causal, 1.0f / sqrtf((float)d), s);
            kern_flash_merge(og, lg, ob, lb, mine * Hu, d, s);
        }
        kc = kn, vc = vn;
    }
    pl_stream_sync(s);
    pl_free(ob), pl_free(lb);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) pl_free(kv[b][i]);
}

/* The column's ring backward, cp_ring_backward's scheme over the rows' blocks: dqg (+=) of
 * this row's queries, dkg and dvg (written) of its keys, home after a full turn. */
static void col_ring_backward(const cp_config *c, usp_grid *G, const float *qg, const float *kg, const float *vg,
                              const float *og, const float *lg, const float *gg, float *dqg, float *dkg, float *dvg,
                              pl_stream *s) {
    int r = G->r, g = G->g, Hu = c->heads / G->ud, Hkvu = c->kv_heads / G->ud, d = c->head_dim, mine = G->gS[g];
    int next = (g + 1) % r, prev = (g - 1 + r) % r;
    size_t wk = (size_t)Hkvu * d, blk = (size_t)G->maxS * wk;
    float scale = 1.0f / sqrtf((float)d);
    if (r == 1) {
        pl_fill(dkg, 0.0f, (size_t)mine * wk, s);
        pl_fill(dvg, 0.0f, (size_t)mine * wk, s);
        if (grid_needed(c, G, g))
            kern_flash_block_backward(dqg, dkg, dvg, qg, kg, vg, og, lg, gg, grid_pos(G, g), grid_pos(G, g), mine, mine, Hu,
                                      Hkvu, d, c->causal, scale, s);
        return;
    }
    float *kv[2][2], *acc[2][2];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) kv[b][i] = pl_malloc_floats(blk), acc[b][i] = pl_malloc_floats(blk);
    pl_fill(acc[0][0], 0.0f, (size_t)mine * wk, s);
    pl_fill(acc[0][1], 0.0f, (size_t)mine * wk, s);
    const float *kc = kg, *vc = vg;
    for (int t = 0; t < r; t++) {
        int owner = (g - t + r) % r, incoming = (g - t - 1 + 2 * r) % r, last = (g - t + 1 + r) % r;
        float *kn = kv[t % 2][0], *vn = kv[t % 2][1], *dk_cur = acc[t % 2][0], *dv_cur = acc[t % 2][1];
        pl_group_start();
        if (t > 0) {
            pl_send(acc[(t + 1) % 2][0], (size_t)G->gS[last] * wk, next, G->col, s);
            pl_send(acc[(t + 1) % 2][1], (size_t)G->gS[last] * wk, next, G->col, s);
            pl_recv(dk_cur, (size_t)G->gS[owner] * wk, prev, G->col, s);
            pl_recv(dv_cur, (size_t)G->gS[owner] * wk, prev, G->col, s);
        }
        if (t < r - 1) {
            pl_send(kc, (size_t)G->gS[owner] * wk, next, G->col, s);
            pl_send(vc, (size_t)G->gS[owner] * wk, next, G->col, s);
            pl_recv(kn, (size_t)G->gS[incoming] * wk, prev, G->col, s);
            pl_recv(vn, (size_t)G->gS[incoming] * wk, prev, G->col, s);
        }
        pl_group_end();
        if (grid_needed(c, G, owner))
            kern_flash_block_backward(dqg, dk_cur, dv_cur, qg, kc, vc, og, lg, gg, grid_pos(G, g), grid_pos(G, owner),
                                      mine, G->gS[owner], Hu, Hkvu, d, c->causal, scale, s);
        kc = kn, vc = vn;
    }
    pl_group_start();
    pl_send(acc[(r - 1) % 2][0], (size_t)G->gS[next] * wk, next, G->col, s);
    pl_send(acc[(r - 1) % 2][1], (size_t)G->gS[next] * wk, next, G->col, s);
    pl_recv(dkg, (size_t)mine * wk, prev, G->col, s);
    pl_recv(dvg, (size_t)mine * wk, prev, G->col, s);
    pl_group_end();
    pl_stream_sync(s);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) pl_free(kv[b][i]), pl_free(acc[b][i]);
}

void cp_usp_forward(const cp_config *c, int ud, const float *q, const float *k, const float *v, float *o,
                    pl_stream *s) {
    usp_grid G;
    grid_make(c, ud, &G);
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, mine = G.gS[G.g];
    size_t wq = (size_t)(H / ud) * d, wk = (size_t)(Hkv / ud) * d;
    float *qg = pl_malloc_floats((size_t)mine * wq), *kg = pl_malloc_floats((size_t)mine * wk),
          *vg = pl_malloc_floats((size_t)mine * wk), *og = pl_malloc_floats((size_t)mine * wq),
          *lg = pl_malloc_floats((size_t)mine * (H / ud));
    uly_to_heads(c, &G.u, q, H, qg, s);
    uly_to_heads(c, &G.u, k, Hkv, kg, s);
    uly_to_heads(c, &G.u, v, Hkv, vg, s);
    col_ring_forward(c, &G, qg, kg, vg, og, lg, s);
    uly_from_heads(c, &G.u, og, H, o, s);
    grid_free(&G, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(og), pl_free(lg);
}

/* The backward recomputes the row's (o, lse) with the column's ring forward, then runs the
 * column's ring backward; q, k, v, dout go to the heads' split and dq, dk, dv come back. */
void cp_usp_backward(const cp_config *c, int ud, const float *q, const float *k, const float *v, const float *dout,
                     float *dq, float *dk, float *dv, pl_stream *s) {
    usp_grid G;
    grid_make(c, ud, &G);
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, mine = G.gS[G.g];
    size_t wq = (size_t)(H / ud) * d, wk = (size_t)(Hkv / ud) * d;
    float *qg = pl_malloc_floats((size_t)mine * wq), *kg = pl_malloc_floats((size_t)mine * wk),
          *vg = pl_malloc_floats((size_t)mine * wk), *gg = pl_malloc_floats((size_t)mine * wq),
          *og = pl_malloc_floats((size_t)mine * wq), *lg = pl_malloc_floats((size_t)mine * (H / ud)),
          *dqg = pl_malloc_floats((size_t)mine * wq), *dkg = pl_malloc_floats((size_t)mine * wk),
          *dvg = pl_malloc_floats((size_t)mine * wk);
    uly_to_heads(c, &G.u, q, H, qg, s);
    uly_to_heads(c, &G.u, k, Hkv, kg, s);
    uly_to_heads(c, &G.u, v, Hkv, vg, s);
    uly_to_heads(c, &G.u, dout, H, gg, s);
    col_ring_forward(c, &G, qg, kg, vg, og, lg, s);
    pl_fill(dqg, 0.0f, (size_t)mine * wq, s);
    col_ring_backward(c, &G, qg, kg, vg, og, lg, gg, dqg, dkg, dvg, s);
    uly_from_heads(c, &G.u, dqg, H, dq, s);
    uly_from_heads(c, &G.u, dkg, Hkv, dk, s);
    uly_from_heads(c, &G.u, dvg, Hkv, dv, s);
    grid_free(&G, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(gg), pl_free(og), pl_free(lg);
    pl_free(dqg), pl_free(dkg), pl_free(dvg);
}
