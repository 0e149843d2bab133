/* llama_split.c - Lab 5, the reference solution: llama.cpp's three ways of running a llama
 * over n ranks (layer, row and tensor split) on the pieces of models/llama.h.
 *
 * Everything runs on the compute stream (NULL). Sends are rendezvous, so in layer split a
 * rank that has sent micro-batch k to the next rank goes on with micro-batch k + 1 while
 * the next rank computes k: that is the pipeline.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_gather.h" // defines: kern_gather_rows (the row split's placement)
#include "llama_split.h"

/* ================================================================================== */
/* The rules                                                                          */
/* ================================================================================== */

int ls_cuts(const float *p, int n_props, int n, float *cuts) {
    if (n < 1 || n > LS_MAX_RANKS || n_props < 0 || n_props > n || (n_props > 0 && !p)) return LS_ERR_SPLIT;
    float sum = 0.0f;
    for (int r = 0; r < n_props; r++) {
        if (!(p[r] >= 0.0f) || isinf(p[r])) return LS_ERR_SPLIT;
        sum += p[r];
    }
    if (isinf(sum)) return LS_ERR_SPLIT;
    bool equal = sum == 0.0f;
    float acc = 0.0f, total = equal ? (float)n : sum;
    cuts[0] = 0.0f;
    for (int r = 0; r < n; r++) {
        acc += equal ? 1.0f : r < n_props ? p[r] : 0.0f;
        cuts[r + 1] = acc / total;
    }
    return LS_OK;
}

int ls_layer_owner(const float *cuts, int n, int n_layer, int slot) {
    float x = (float)slot / (float)(n_layer + 1);
    int r = 0;
    while (r < n - 1 && !(x < cuts[r + 1])) r++;
    return r;
}

void ls_row_range(const float *cuts, int n, int r, int64_t nrows, int64_t *row0, int64_t *row1) {
    int64_t lo = r == 0 ? 0 : (int64_t)((float)nrows * cuts[r]);
    int64_t hi = r == n - 1 ? nrows : (int64_t)((float)nrows * cuts[r + 1]);
    lo -= lo % LS_ROW_ROUNDING;
    if (r != n - 1) hi -= hi % LS_ROW_ROUNDING;
    *row0 = lo;
    *row1 = hi;
}

int ls_tensor_split(const llm_config *cfg, int n, int r, llm_split *sp) {
    int H = cfg->n_head, K = cfg->n_head_kv, g = H / K, F = cfg->n_ff;
    if (n < 1 || n > H || n > F || r < 0 || r >= n) return LS_ERR_SPLIT;
    memset(sp, 0, sizeof *sp);
    if (n <= K) { /* whole KV groups per rank */
        int k0 = r * K / n, k1 = (r + 1) * K / n;
        sp->head0 = k0 * g;
        sp->n_head = (k1 - k0) * g;
    } else { /* the ranks of one group share its KV head and divide its query heads */
        int k = r * K / n, a = r, b = r + 1;
        while (a > 0 && (a - 1) * K / n == k) a--;
        while (b < n && b * K / n == k) b++;
        sp->head0 = k * g + (r - a) * g / (b - a);
        sp->n_head = k * g + (r - a + 1) * g / (b - a) - sp->head0;
    }
    sp->ff0 = r * F / n;
    sp->n_ff = (r + 1) * F / n - sp->ff0;
    return LS_OK;
}

/* ================================================================================== */
/* The state                                                                          */
/* ================================================================================== */

struct ls_state {
    llm_config cfg;
    ls_mode mode;
    pl_comm *comm;
    int me, n, n_micro;
    float cuts[LS_MAX_RANKS + 1];
    llm_split split;     /* the split llm_layer_forward gets: heads/FFN and the hooks */
    llm_weights w;       /* what this rank holds; the rest is NULL                    */
    llm_kv_cache cache;  /* this rank's layers and KV heads (maybe none: batch checks) */
    llm_workspace ws;
    bool load_failed;
    /* layer split */
    int *owner;          /* [n_layer + 1]: the rank of each slot, the output last     */
    int layer0, layer1;  /* this rank's layers                                        */
    /* row split: rows[t][2r], rows[t][2r + 1] = rank r's rows of matrix t            */
    int64_t rows[LLM_N_TENSORS][2 * LS_MAX_RANKS];
    int T;               /* n_tokens_max                                              */
    float *xin;          /* workers: the broadcast activation [n, in]                 */
    float *yblk;         /* workers: their block of a product [n, their rows]         */
    float *stage;        /* main: every rank's block, rank r's from T * (its first row) */
    int *plan[LLM_N_TENSORS]; /* main: where each chunk of y is in stage (device)     */
    int chunk[LLM_N_TENSORS]; /* ... and the chunks' width                            */
};

/* A new device matrix with rows [r0, r0 + nr) x columns [c0, c0 + nc) of `which`, in the
 * type the model holds it: the quantised blocks stay blocks (decode reads 4.5 to 8.5 bits
 * per weight instead of 32), unless the column cut falls inside a block of 32, where that
 * shard alone is dequantised. Data NULL for an empty block (or a failed load, remembered in
 * st->load_failed). */
static llm_mat load(ls_state *st, llm_tensor which, int layer, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
    llm_mat m = {NULL, LLM_F32};
    if (nr <= 0 || nc <= 0) return m;
    m.type = ls_type(which, layer);
    if (m.type != LLM_F32 && (c0 % LLM_QK || nc % LLM_QK)) m.type = LLM_F32;
    m.data = pl_malloc(llm_mat_bytes(m.type, nr, nc));
    if (ls_load(which, layer, r0, nr, c0, nc, m.type, m.data) != 0) {
        pl_free(m.data);
        st->load_failed = true;
        m.data = NULL;
    }
    return m;
}

/* The block of layer tensor t this rank holds. */
static void layer_block(const ls_state *st, llm_tensor t, int64_t *r0, int64_t *nr, int64_t *c0, int64_t *nc) {
    llm_tensor_shape(&st->cfg, t, nr, nc);
    *r0 = *c0 = 0;
    if (st->mode == LS_ROW) {
        if (*nr == 1) *nr = st->me == 0 ? 1 : 0; /* norms: the main rank's work */
        else {
            *r0 = st->rows[t][2 * st->me];
            *nr = st->rows[t][2 * st->me + 1] - *r0;
        }
    } else if (st->mode == LS_TENSOR) {
        const llm_split *sp = &st->split;
        int hd = st->cfg.head_dim, kv0, nkv = llm_split_kv_heads(&st->cfg, sp, &kv0);
        switch (t) {
        case LLM_WQ: *r0 = (int64_t)sp->head0 * hd, *nr = (int64_t)sp->n_head * hd; break;
        case LLM_WK: case LLM_WV: *r0 = (int64_t)kv0 * hd, *nr = (int64_t)nkv * hd; break;
        case LLM_WO: *c0 = (int64_t)sp->head0 * hd, *nc = (int64_t)sp->n_head * hd; break;
        case LLM_W_GATE: case LLM_W_UP: *r0 = sp->ff0, *nr = sp->n_ff; break;
        case LLM_W_DOWN: *c0 = sp->ff0, *nc = sp->n_ff; break;
        default: break;
        }
    }
}

static void load_layer(ls_state *st, int l) {
    llm_layer_weights *lw = &st->w.layers[l];
    llm_mat norm[2];
    llm_mat *slot[LLM_N_LAYER_TENSORS] = {&norm[0], &lw->wq,     &lw->wk,   &lw->wv,    &lw->wo,
                                          &norm[1], &lw->w_gate, &lw->w_up, &lw->w_down};
    for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
        int64_t r0, nr, c0, nc;
        layer_block(st, (llm_tensor)t, &r0, &nr, &c0, &nc);
        *slot[t] = load(st, (llm_tensor)t, l, r0, nr, c0, nc);
    }
    lw->attn_norm = norm[0].data, lw->ffn_norm = norm[1].data; /* float32 vectors */
}

/* Token embedding, output norm and output matrix, where the mode puts them. A rank that
 * holds the tied embedding multiplies with it: no second copy. */
static void load_globals(ls_state *st) {
    const llm_config *c = &st->cfg;
    int64_t V = c->n_vocab, C = c->n_embd;
    bool embd = st->mode == LS_TENSOR || st->me == 0;
    bool head = st->mode == LS_LAYER ? st->owner[c->n_layer] == st->me : st->me == 0;
    if (embd) st->w.token_embd = load(st, LLM_TOKEN_EMBD, -1, 0, V, 0, C);
    if (head) st->w.output_norm = load(st, LLM_OUTPUT_NORM, -1, 0, 1, 0, C).data;
    int64_t r0 = 0, r1 = head ? V : 0;
    if (st->mode == LS_ROW) r0 = st->rows[LLM_OUTPUT][2 * st->me], r1 = st->rows[LLM_OUTPUT][2 * st->me + 1];
    if (r1 > r0 && c->tied_output && st->w.token_embd.data) st->w.output = llm_mat_rows(st->w.token_embd, C, r0);
    else st->w.output = load(st, LLM_OUTPUT, -1, r0, r1 - r0, 0, C);
}

/* ================================================================================== */
/* Hooks                                                                              */
/* ================================================================================== */

/* Row split, on the main rank: broadcast x, compute our rows, gather the other ranks'
 * blocks. A block of the weight's rows is a block of y's COLUMNS [a, b): it goes in at
 * column offset a of every token's row, not after the previous block. A copy per token
 * row would do; one gather of chunks (the widest width that divides every block) does it
 * in one operation, as llama.cpp's one strided 2-D copy per device. */
static void row_linear(const llm_split *sp, llm_tensor which, int layer, llm_mat W, float *y, const float *x,
                       int n_tokens, int n_out, int n_in, pl_stream *s) {
    (void)layer;
    ls_state *st = sp->ctx;
    const int64_t *rg = st->rows[which];
    pl_broadcast(x, (float *)x, (size_t)n_tokens * n_in, 0, st->comm, s);
    if (rg[1] > 0) llm_linear(st->stage, (int)rg[1], x, n_in, W, (int)rg[1], n_in, n_tokens, s);
    pl_group_start();
    for (int r = 1; r < st->n; r++) {
        int64_t a = rg[2 * r], m = rg[2 * r + 1] - a;
        if (m > 0) pl_recv(st->stage + (size_t)st->T * a, (size_t)(n_tokens * m), r, st->comm, s);
    }
    pl_group_end();
    kern_gather_rows(y, st->stage, st->plan[which], n_tokens * (n_out / st->chunk[which]), st->chunk[which], s);
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* Chunk c of token t's row of y (columns [c*g, c*g + g), inside rank r's block [a, b)) is
 * at float T*a + t*(b - a) + (c*g - a) of stage: in chunks of g, for every t < T. */
static void row_plan(ls_state *st, llm_tensor which) {
    int64_t rows, cols, g = 0;
    llm_tensor_shape(&st->cfg, which, &rows, &cols);
    for (int r = 0; r < st->n; r++) g = gcd(gcd(g, st->rows[which][2 * r]), st->rows[which][2 * r + 1]);
    int64_t per = rows / g, T = st->T;
    int *h = malloc((size_t)(T * per) * sizeof(int));
    PL_CHECK(h != NULL, "out of host memory");
    for (int r = 0; r < st->n; r++) {
        int64_t a = st->rows[which][2 * r], b = st->rows[which][2 * r + 1];
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = a; j < b; j += g) h[t * per + j / g] = (int)((T * a + t * (b - a) + j - a) / g);
    }
    st->plan[which] = pl_malloc((size_t)(T * per) * sizeof(int));
    pl_upload(st->plan[which], h, (size_t)(T * per) * sizeof(int));
    st->chunk[which] = (int)g;
    free(h);
}

/* Row split, on the other ranks: the same matmul's broadcast, our block, sent to rank 0. */
static void row_part(ls_state *st, llm_tensor which, llm_mat W, int n_tokens) {
    int64_t rows, n_in;
    llm_tensor_shape(&st->cfg, which, &rows, &n_in);
    const int64_t *rg = st->rows[which];
    int64_t m = rg[2 * st->me + 1] - rg[2 * st->me];
    pl_broadcast(st->xin, st->xin, (size_t)(n_tokens * n_in), 0, st->comm, NULL);
    if (m == 0) return;
    llm_linear(st->yblk, (int)m, st->xin, (int)n_in, W, (int)m, (int)n_in, n_tokens, NULL);
    pl_send(st->yblk, (size_t)(n_tokens * m), 0, st->comm, NULL);
}

/* Tensor split: Megatron's g after the attention output and after the FFN down projection. */
static void tp_allreduce(const llm_split *sp, float *y, size_t count, pl_stream *s) {
    const ls_state *st = sp->ctx;
    pl_allreduce(y, y, count, PL_SUM, st->comm, s);
}

/* ================================================================================== */
/* ls_init / ls_free                                                                  */
/* ================================================================================== */

static int fail(ls_state *st, char *err, size_t errlen, int code, const char *why) {
    snprintf(err, errlen, "%s", why);
    ls_free(st);
    return code;
}

int ls_init(ls_state **out, const llm_config *cfg, const ls_params *p, char *err, size_t errlen) {
    *out = NULL;
    int n = pl_comm_size(p->comm), me = pl_comm_rank(p->comm), L = cfg->n_layer;
    float cuts[LS_MAX_RANKS + 1];
    llm_split tsp = llm_split_full(cfg);
    if (p->mode < LS_LAYER || p->mode > LS_TENSOR || p->n_seq_max < 1 || p->n_ctx < 1 || p->n_tokens_max < 1 ||
        p->n_micro < 1)
        return fail(NULL, err, errlen, LS_ERR_MODE, "unknown split mode, or a size that is not positive");
    if (ls_cuts(p->tensor_split, p->n_split, n, cuts) != LS_OK)
        return fail(NULL, err, errlen, LS_ERR_SPLIT,
                    "--tensor-split: proportions must be finite, >= 0, at most one per rank");
    if (p->mode == LS_TENSOR && ls_tensor_split(cfg, n, me, &tsp) != LS_OK)
        return fail(NULL, err, errlen, LS_ERR_SPLIT, "tensor split: more ranks than query heads (or FFN features)");

    ls_state *st = calloc(1, sizeof *st);
    PL_CHECK(st != NULL, "out of host memory");
    st->cfg = *cfg, st->mode = p->mode, st->comm = p->comm, st->me = me, st->n = n, st->n_micro = p->n_micro;
    memcpy(st->cuts, cuts, sizeof cuts);
    st->split = tsp;
    st->owner = calloc((size_t)L + 1, sizeof(int));
    st->w.layers = calloc((size_t)L, sizeof *st->w.layers);
    PL_CHECK(st->owner && st->w.layers, "out of host memory");
    st->layer0 = st->layer1 = 0;
    for (int s = 0; s <= L; s++) {
        st->owner[s] = ls_layer_owner(cuts, n, L, s);
        if (s < L && st->owner[s] == me) {
            if (st->layer1 == st->layer0) st->layer0 = s;
            st->layer1 = s + 1;
        }
    }
    int64_t widest = 0; /* the most rows any rank owns of any matrix */
    for (int t = LLM_WQ; t < LLM_N_TENSORS; t++) {
        int64_t rows, cols;
        llm_tensor_shape(cfg, (llm_tensor)t, &rows, &cols);
        for (int r = 0; r < n && rows > 1; r++) {
            ls_row_range(cuts, n, r, rows, &st->rows[t][2 * r], &st->rows[t][2 * r + 1]);
            int64_t m = st->rows[t][2 * r + 1] - st->rows[t][2 * r];
            widest = m > widest ? m : widest;
        }
    }

    int first = 0, count = L; /* the layers this rank holds */
    if (p->mode == LS_LAYER) first = st->layer0, count = st->layer1 - st->layer0;
    for (int l = first; l < first + count; l++) load_layer(st, l);
    load_globals(st);
    if (st->load_failed) return fail(st, err, errlen, LS_ERR_LOAD, "ls_load refused a block of the model");

    int kv_layers = p->mode == LS_ROW && me != 0 ? 0 : count; /* row split: the cache is the main rank's */
    llm_kv_cache_init(&st->cache, cfg, p->mode == LS_TENSOR ? &tsp : NULL, p->n_seq_max, p->n_ctx, first, kv_layers);
    llm_workspace_init(&st->ws, cfg, p->mode == LS_TENSOR ? &tsp : NULL, p->n_tokens_max);
    if (p->mode == LS_ROW && n > 1) {
        int64_t widest_in = cfg->n_embd > cfg->n_ff ? cfg->n_embd : cfg->n_ff;
        if ((int64_t)cfg->n_head * cfg->head_dim > widest_in) widest_in = (int64_t)cfg->n_head * cfg->head_dim;
        st->T = p->n_tokens_max;
        if (me != 0) {
            st->xin = pl_malloc_floats((size_t)(st->T * widest_in));
            st->yblk = pl_malloc_floats((size_t)(st->T * widest));
        } else {
            st->stage = pl_malloc_floats((size_t)st->T * (size_t)(cfg->n_vocab > widest_in ? cfg->n_vocab : widest_in));
            for (int t = LLM_WQ; t < LLM_N_TENSORS; t++)
                if (t != LLM_FFN_NORM && t != LLM_TOKEN_EMBD && t != LLM_OUTPUT_NORM) row_plan(st, (llm_tensor)t);
        }
        st->split.linear = row_linear;
    }
    if (p->mode == LS_TENSOR && n > 1) st->split.reduce = tp_allreduce;
    st->split.ctx = st;
    *out = st;
    return LS_OK;
}

void ls_free(ls_state *st) {
    if (!st) return;
    llm_weights_free(&st->w, &st->cfg);
    llm_kv_cache_free(&st->cache);
    llm_workspace_free(&st->ws);
    float *bufs[3] = {st->xin, st->yblk, st->stage};
    for (int i = 0; i < 3; i++)
        if (bufs[i]) pl_free(bufs[i]);
    for (int t = 0; t < LLM_N_TENSORS; t++)
        if (st->plan[t]) pl_free(st->plan[t]);
    free(st->owner);
    free(st);
}

/* ================================================================================== */
/* ls_forward                                                                         */
/* ================================================================================== */

/* Layer split: the batch's sequences in min(n_micro, S) micro-batches; each goes down the
 * chain of slot owners, the hidden state [tokens, C] crossing to the next owner. */
static int layer_forward(ls_state *st, const int *tok, const int *seq, const int *pos, int n_tokens, int mode,
                         float *logits, char *err, size_t errlen) {
    const llm_config *c = &st->cfg;
    int L = c->n_layer, S = 0, rows = 0;
    for (int t = 0; t < n_tokens; t++) S += t == 0 || seq[t] != seq[t - 1];
    int m = st->n == 1 ? 1 : st->n_micro < S ? st->n_micro : S; /* one rank: no pipeline to fill */
    int *start = malloc(((size_t)S + 1) * sizeof(int)); /* token index where each sequence starts */
    PL_CHECK(start != NULL, "out of host memory");
    for (int t = 0, k = 0; t < n_tokens; t++)
        if (t == 0 || seq[t] != seq[t - 1]) start[k++] = t;
    start[S] = n_tokens;
    for (int k = 0; k < m; k++) {
        int t0 = start[k * S / m], nt = start[(k + 1) * S / m] - t0;
        int n_out = llm_batch_prepare(&st->ws, &st->cache, c, tok + t0, seq + t0, pos + t0, nt, mode);
        if (n_out < 0) {
            snprintf(err, errlen, "%s", st->ws.err);
            free(start);
            return -1;
        }
        float *x = st->ws.x;
        size_t count = (size_t)nt * c->n_embd;
        if (st->me == 0) llm_embed(c, &st->w, &st->ws, x, NULL);
        for (int s = 0, prev = 0; s <= L; s++) {
            int o = st->owner[s];
            if (o != prev) {
                if (st->me == prev) pl_send(x, count, o, st->comm, NULL);
                else if (st->me == o) pl_recv(x, count, prev, st->comm, NULL);
                prev = o;
            }
            if (o != st->me) continue;
            if (s < L) llm_layer_forward(c, &st->w.layers[s], s, NULL, &st->cache, &st->ws, x, NULL);
            else llm_head(c, &st->w, NULL, &st->ws, x, logits + (size_t)rows * c->n_vocab, NULL);
        }
        rows += n_out;
    }
    free(start);
    return rows;
}

int ls_forward(ls_state *st, const int *tokens, const int *seq_ids, const int *pos, int n_tokens, int logits_mode,
               float *logits, char *err, size_t errlen) {
    if (!st || n_tokens < 1 || n_tokens > st->ws.n_tokens_max) {
        snprintf(err, errlen, "batch of %d tokens: the state takes 1 .. %d", n_tokens, st ? st->ws.n_tokens_max : 0);
        return -1;
    }
    if (st->mode == LS_LAYER) return layer_forward(st, tokens, seq_ids, pos, n_tokens, logits_mode, logits, err, errlen);
    const llm_config *c = &st->cfg;
    llm_workspace *ws = &st->ws;
    int n_out = llm_batch_prepare(ws, &st->cache, c, tokens, seq_ids, pos, n_tokens, logits_mode);
    if (n_out < 0) {
        snprintf(err, errlen, "%s", ws->err);
        return -1;
    }
    if (st->mode == LS_ROW && st->me != 0) { /* the other ranks follow the main rank's matmuls in order */
        for (int l = 0; l < c->n_layer; l++) {
            const llm_layer_weights *lw = &st->w.layers[l];
            const llm_mat W[7] = {lw->wq, lw->wk, lw->wv, lw->wo, lw->w_gate, lw->w_up, lw->w_down};
            for (int t = LLM_WQ, i = 0; t <= LLM_W_DOWN; t++)
                if (t != LLM_FFN_NORM) row_part(st, (llm_tensor)t, W[i++], n_tokens);
        }
        row_part(st, LLM_OUTPUT, st->w.output, n_out);
        return n_out;
    }
    llm_embed(c, &st->w, ws, ws->x, NULL);
    for (int l = 0; l < c->n_layer; l++)
        llm_layer_forward(c, &st->w.layers[l], l, &st->split, &st->cache, ws, ws->x, NULL);
    if (st->me == 0) llm_head(c, &st->w, &st->split, ws, ws->x, logits, NULL);
    return n_out;
}
