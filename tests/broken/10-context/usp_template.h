/* usp_template.h - the solution's cp_usp_forward with hooks, for the broken 2-D files: a
 * file includes the solution (with cp_usp_forward renamed), defines what it changes and
 * includes this. Hooks (defaults: the solution's):
 *   USP_ROW_SPLIT, USP_COL_SPLIT  the communicators of the grid's row and column
 *   USP_NEEDED                    whether the block of row `owner` is computed (causal)
 */
#ifndef USP_ROW_SPLIT
#define USP_ROW_SPLIT pl_comm_split(c->comm, g, j)
#define USP_COL_SPLIT pl_comm_split(c->comm, j, g)
#endif
#ifndef USP_NEEDED
#define USP_NEEDED (lo[owner] <= hi[g])
#endif

void cp_usp_forward(const cp_config *c, int ud, const float *q, const float *k, const float *v, float *o,
                    pl_stream *s) {
    int n = pl_comm_size(c->comm), me = pl_comm_rank(c->comm), r = n / ud, g = me / ud, j = me % ud;
    pl_comm *row = USP_ROW_SPLIT, *col = USP_COL_SPLIT;
    uly_plan u;
    uly_make_group(c, &u, ud, j, row, g * ud);
    int H = c->heads, Hkv = c->kv_heads, d = c->head_dim, Hu = H / ud, Hkvu = Hkv / ud;
    size_t wq = (size_t)Hu * d, wk = (size_t)Hkvu * d;
    /* every row's gathered tokens, and the first and last position among them */
    int *gS = malloc(3 * (size_t)r * sizeof(int)), *lo = gS + r, *hi = lo + r, maxS = 0;
    for (int x = 0; x < r; x++) {
        gS[x] = 0, lo[x] = c->seq, hi[x] = -1;
        for (int i = 0; i < ud; i++) gS[x] += u.m.rows[x * ud + i];
        for (int t = 0; t < gS[x]; t++) {
            int p = u.m.pos_h[u.m.off[x * ud] + t];
            if (p < lo[x]) lo[x] = p;
            if (p > hi[x]) hi[x] = p;
        }
        if (gS[x] > maxS) maxS = gS[x];
    }
    float *qg = pl_malloc_floats((size_t)u.gS * wq), *kg = pl_malloc_floats((size_t)u.gS * wk),
          *vg = pl_malloc_floats((size_t)u.gS * wk), *og = pl_malloc_floats((size_t)u.gS * wq),
          *lg = pl_malloc_floats((size_t)u.gS * Hu), *ob = pl_malloc_floats((size_t)u.gS * wq),
          *lb = pl_malloc_floats((size_t)u.gS * Hu);
    float *kv[2][2];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) kv[b][i] = pl_malloc_floats((size_t)maxS * wk);
    uly_to_heads(c, &u, q, H, qg, s);
    uly_to_heads(c, &u, k, Hkv, kg, s);
    uly_to_heads(c, &u, v, Hkv, vg, s);
    pl_fill(og, 0.0f, (size_t)u.gS * wq, s);
    pl_fill(lg, -INFINITY, (size_t)u.gS * Hu, s);
    const float *kc = kg, *vc = vg;
    for (int t = 0; t < r; t++) {
        int owner = (g - t + r) % r, incoming = (g - t - 1 + 2 * r) % r;
        float *kn = kv[t % 2][0], *vn = kv[t % 2][1];
        if (t < r - 1) {
            pl_group_start();
            pl_send(kc, (size_t)gS[owner] * wk, (g + 1) % r, col, s);
            pl_send(vc, (size_t)gS[owner] * wk, (g + 1) % r, col, s);
            pl_recv(kn, (size_t)gS[incoming] * wk, (g - 1 + r) % r, col, s);
            pl_recv(vn, (size_t)gS[incoming] * wk, (g - 1 + r) % r, col, s);
            pl_group_end();
        }
        if (!c->causal || USP_NEEDED) {
            kern_flash_block(ob, lb, qg, kc, vc, u.gpos, u.m.pos_d + u.m.off[owner * ud], u.gS, gS[owner], Hu, Hkvu, d,
                             c->causal, 1.0f / sqrtf((float)d), s);
            kern_flash_merge(og, lg, ob, lb, u.gS * Hu, d, s);
        }
        kc = kn, vc = vn;
    }
    uly_from_heads(c, &u, og, H, o, s);
    uly_free(&u, s);
    pl_free(qg), pl_free(kg), pl_free(vg), pl_free(og), pl_free(lg), pl_free(ob), pl_free(lb);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) pl_free(kv[b][i]);
    free(gS);
    pl_comm_free(row);
    pl_comm_free(col);
}
