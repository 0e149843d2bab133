/* ulysses_template.h - the solution's cp_ulysses_forward with hooks, for the broken Ulysses
 * files: a file includes the solution (with cp_ulysses_forward renamed), defines what it
 * changes and includes this. Hooks (defaults: the solution's):
 *   ULY_PACK(t, p, rows, n)  the row of q viewed as [rows * n, heads/n * d] that goes to
 *                            rank p as its row t (token t's heads of rank p: t * n + p)
 *   ULY_GATHERED_POS(m)      the positions of the gathered sequence (every rank's, in rank order)
 *   ULY_AFTER_GATHER(c)      code run once q, k and v are gathered
 */
#ifndef ULY_PACK
#define ULY_PACK(t, p, rows, n) ((t) * (n) + (p))
#endif
#ifndef ULY_GATHERED_POS
#define ULY_GATHERED_POS(m) ((m).pos_d)
#endif
#ifndef ULY_AFTER_GATHER
#define ULY_AFTER_GATHER(c) ((void)0)
#endif

void cp_ulysses_forward(const cp_config *c, const float *q, const float *k, const float *v, float *o,
                        pl_stream *s) {
    cp_map m;
    map_make(c, &m);
    int n = m.n, me = m.me, S = c->seq, d = c->head_dim, Hn = c->heads / n, Hkvn = c->kv_heads / n;
    int rows = m.rows[me];
    int *idx_h = malloc((size_t)rows * n * sizeof(int) + 1), *mine = malloc(2 * (size_t)n * sizeof(int));
    int *moff = mine + n;
    for (int p = 0; p < n; p++)
        for (int t = 0; t < rows; t++) idx_h[p * rows + t] = ULY_PACK(t, p, rows, n);
    for (int p = 0; p < n; p++) mine[p] = rows, moff[p] = p * rows;
    int *idx = pl_malloc((size_t)rows * n * sizeof(int) + 1);
    pl_upload(idx, idx_h, (size_t)rows * n * sizeof(int));
    size_t wq = (size_t)Hn * d, wk = (size_t)Hkvn * d;
    float *pack = pl_malloc_floats((size_t)rows * n * wq);
    float *qg = pl_malloc_floats((size_t)S * wq), *kg = pl_malloc_floats((size_t)S * wk),
          *vg = pl_malloc_floats((size_t)S * wk), *og = pl_malloc_floats((size_t)S * wq),
          *lg = pl_malloc_floats((size_t)S * Hn);
    const float *src[3] = {q, k, v};
    float *dst[3] = {qg, kg, vg};
    for (int i = 0; i < 3; i++) {
        size_t w = i == 0 ? wq : wk;
        kern_gather_rows(pack, src[i], idx, rows * n, (int)w, s);
        alltoall_rows_in(pack, mine, moff, dst[i], m.rows, m.off, w, m.me, m.n, c->comm, s);
    }
    ULY_AFTER_GATHER(c);
    kern_flash_block(og, lg, qg, kg, vg, ULY_GATHERED_POS(m), ULY_GATHERED_POS(m), S, S, Hn, Hkvn, d, c->causal,
                     1.0f / sqrtf((float)d), s);
    alltoall_rows_in(og, m.rows, m.off, pack, mine, moff, wq, m.me, m.n, c->comm, s);
    for (int p = 0; p < n; p++)
        for (int t = 0; t < rows; t++) idx_h[t * n + p] = p * rows + t;
    pl_stream_sync(s);
    pl_upload(idx, idx_h, (size_t)rows * n * sizeof(int));
    kern_gather_rows(o, pack, idx, rows * n, (int)wq, s);
    pl_stream_sync(s);
    pl_free(idx);
    pl_free(pack);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(og), pl_free(lg);
    free(idx_h);
    free(mine);
    map_free(&m);
}
