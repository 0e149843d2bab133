/* llama.c - the reference llama forward (inference): config and split checks, random and
 * sharded weights, the KV cache, the workspace, the batch, and the forward in pieces. The
 * GGUF loader is in llama_gguf.c. */
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_gather.h"   // defines: kern_gather_rows (embedding lookup, rows for logits)
#include "kern_gqa.h"      // defines: kern_kv_store, kern_gqa_attention_forward
#include "kern_qmatmul.h"  // defines: kern_qmatmul_forward, kern_qget_rows, kern_q_row_bytes
#include "kern_residual.h" // defines: kern_residual_forward
#include "kern_rmsnorm.h"  // defines: kern_rmsnorm_forward
#include "kern_rope.h"     // defines: kern_rope_forward
#include "kern_swiglu.h"   // defines: kern_swiglu_forward
#include "pl_rng.h"        // defines: pl_rng_fill
#include "pl_runtime.h"    // defines: PL_CHECK

/* ================================================================================== */
/* Config, tensors, splits                                                             */
/* ================================================================================== */

int llm_config_check(const llm_config *c, char *err, size_t errlen) {
    const char *bad = NULL;
    if (c->n_layer <= 0) bad = "n_layer must be positive";
    else if (c->n_embd <= 0) bad = "n_embd must be positive";
    else if (c->n_ff <= 0) bad = "n_ff must be positive";
    else if (c->n_head <= 0 || c->n_head_kv <= 0) bad = "n_head and n_head_kv must be positive";
    else if (c->n_head % c->n_head_kv) bad = "n_head must be a multiple of n_head_kv";
    else if (c->head_dim <= 0 || c->head_dim % 2) bad = "head_dim must be positive and even (rope rotates pairs)";
    else if (c->n_vocab <= 0) bad = "n_vocab must be positive";
    else if (c->n_ctx <= 0) bad = "n_ctx must be positive";
    else if (!(c->rope_base > 0.0f)) bad = "rope_base must be positive";
    else if (!(c->rms_eps >= 0.0f)) bad = "rms_eps must not be negative";
    if (bad) snprintf(err, errlen, "llama config: %s", bad);
    return bad ? -1 : 0;
}

void llm_tensor_shape(const llm_config *c, llm_tensor which, int64_t *rows, int64_t *cols) {
    int64_t C = c->n_embd, F = c->n_ff, Q = (int64_t)c->n_head * c->head_dim;
    int64_t KV = (int64_t)c->n_head_kv * c->head_dim, V = c->n_vocab;
    int64_t r[LLM_N_TENSORS] = {1, Q, KV, KV, C, 1, F, F, C, V, 1, V};
    int64_t k[LLM_N_TENSORS] = {C, C, C, C, Q, C, C, C, F, C, C, C};
    *rows = r[which];
    *cols = k[which];
}

const char *llm_tensor_gguf_name(llm_tensor which, int layer, char *buf, size_t len) {
    static const char *names[LLM_N_TENSORS] = {
        "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
        "ffn_down", "token_embd", "output_norm", "output"};
    if (which < LLM_N_LAYER_TENSORS) snprintf(buf, len, "blk.%d.%s.weight", layer, names[which]);
    else snprintf(buf, len, "%s.weight", names[which]);
    return buf;
}

llm_split llm_split_full(const llm_config *cfg) {
    llm_split sp = {0, cfg->n_head, 0, cfg->n_ff, NULL, NULL, NULL};
    return sp;
}

int llm_split_check(const llm_config *cfg, const llm_split *sp, char *err, size_t errlen) {
    int group = cfg->n_head / cfg->n_head_kv;
    const char *bad = NULL;
    if (sp->n_head <= 0 || sp->head0 < 0 || sp->head0 + sp->n_head > cfg->n_head)
        bad = "the heads must be a non-empty range inside [0, n_head)";
    else if (!((sp->head0 % group == 0 && sp->n_head % group == 0) ||
               sp->head0 / group == (sp->head0 + sp->n_head - 1) / group))
        bad = "the heads must be whole KV groups, or lie inside one group";
    else if (sp->n_ff <= 0 || sp->ff0 < 0 || sp->ff0 + sp->n_ff > cfg->n_ff)
        bad = "the FFN features must be a non-empty range inside [0, n_ff)";
    if (bad)
        snprintf(err, errlen, "llama split (heads %d+%d of %d, group %d; ffn %d+%d of %d): %s", sp->head0,
                 sp->n_head, cfg->n_head, group, sp->ff0, sp->n_ff, cfg->n_ff, bad);
    return bad ? -1 : 0;
}

int llm_split_kv_heads(const llm_config *cfg, const llm_split *sp, int *kv0) {
    int group = cfg->n_head / cfg->n_head_kv;
    *kv0 = sp->head0 / group;
    return (sp->head0 + sp->n_head - 1) / group - *kv0 + 1;
}

/* A split that must be valid: a wrong one is a bug in the calling program. */
static llm_split split_or_full(const llm_config *cfg, const llm_split *sp) {
    llm_split s = sp ? *sp : llm_split_full(cfg);
    char err[256];
    if (llm_split_check(cfg, &s, err, sizeof err)) pl_fatal(__FILE__, __LINE__, "llm_split_check", err);
    return s;
}

/* ================================================================================== */
/* Weights                                                                             */
/* ================================================================================== */

size_t llm_mat_bytes(int type, int64_t rows, int64_t cols) {
    if (type == LLM_F32) return (size_t)(rows * cols) * sizeof(float);
    return (size_t)rows * kern_q_row_bytes(type, cols);
}

llm_mat llm_mat_rows(llm_mat m, int64_t cols, int64_t row0) {
    if (m.data) m.data = (char *)m.data + llm_mat_bytes(m.type, row0, cols);
    return m;
}

const char *llm_type_name(int type) {
    switch (type) {
    case LLM_F32: return "f32";
    case LLM_Q4_0: return "q4_0";
    case LLM_Q4_1: return "q4_1";
    case LLM_Q8_0: return "q8_0";
    default: return "?";
    }
}

void llm_fill_random(pl_tensor dst, const llm_config *cfg, llm_tensor which, int layer, int64_t row0,
                     int64_t col0, uint64_t seed) {
    int64_t rows, cols;
    llm_tensor_shape(cfg, which, &rows, &cols);
    if (which >= LLM_N_LAYER_TENSORS) layer = cfg->n_layer; /* the global tensors: one past the layers */
    uint64_t id = 5000u + (uint64_t)layer * 16u + (uint64_t)which;
    if (rows == 1) {
        pl_rng_fill(dst, cols, row0, col0, seed, id, PL_RNG_UNIFORM, 0.8f, 1.2f);
    } else if (which == LLM_TOKEN_EMBD) {
        pl_rng_fill(dst, cols, row0, col0, seed, id, PL_RNG_UNIFORM, -1.0f, 1.0f);
    } else {
        float a = sqrtf(3.0f / (float)cols); /* uniform(-a, a) has variance a^2 / 3 = 1 / in */
        pl_rng_fill(dst, cols, row0, col0, seed, id, PL_RNG_UNIFORM, -a, a);
    }
}

/* Rows x cols of the rank's shard of a layer tensor, and its origin in the whole tensor. */
static void shard_shape(const llm_config *cfg, const llm_split *sp, llm_tensor which, int64_t *rows,
                        int64_t *cols, int64_t *row0, int64_t *col0) {
    int hd = cfg->head_dim, kv0, nkv = llm_split_kv_heads(cfg, sp, &kv0);
    llm_tensor_shape(cfg, which, rows, cols);
    *row0 = *col0 = 0;
    switch (which) {
    case LLM_WQ: *rows = (int64_t)sp->n_head * hd, *row0 = (int64_t)sp->head0 * hd; break;
    case LLM_WK: case LLM_WV: *rows = (int64_t)nkv * hd, *row0 = (int64_t)kv0 * hd; break;
    case LLM_WO: *cols = (int64_t)sp->n_head * hd, *col0 = (int64_t)sp->head0 * hd; break;
    case LLM_W_GATE: case LLM_W_UP: *rows = sp->n_ff, *row0 = sp->ff0; break;
    case LLM_W_DOWN: *cols = sp->n_ff, *col0 = sp->ff0; break;
    default: break;
    }
}

/* A layer's tensors as matrices: the norms are float32 vectors of one row. */
static llm_mat layer_get(const llm_layer_weights *lw, llm_tensor which) {
    const llm_mat m[LLM_N_LAYER_TENSORS] = {{lw->attn_norm, LLM_F32}, lw->wq, lw->wk, lw->wv, lw->wo,
                                            {lw->ffn_norm, LLM_F32}, lw->w_gate, lw->w_up, lw->w_down};
    return m[which];
}
static void layer_set(llm_layer_weights *lw, llm_tensor which, llm_mat m) {
    llm_mat *slot[LLM_N_LAYER_TENSORS] = {NULL, &lw->wq, &lw->wk, &lw->wv, &lw->wo, NULL, &lw->w_gate, &lw->w_up, &lw->w_down};
    if (which == LLM_ATTN_NORM) lw->attn_norm = m.data;
    else if (which == LLM_FFN_NORM) lw->ffn_norm = m.data;
    else *slot[which] = m;
}

void llm_layer_weights_random(llm_layer_weights *lw, const llm_config *cfg, const llm_split *sp, int layer,
                              uint64_t seed) {
    llm_split s = split_or_full(cfg, sp);
    for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
        int64_t rows, cols, r0, c0;
        shard_shape(cfg, &s, (llm_tensor)t, &rows, &cols, &r0, &c0);
        float *p = pl_malloc_floats((size_t)(rows * cols));
        llm_fill_random(pl_tensor_view(p, rows, cols), cfg, (llm_tensor)t, layer, r0, c0, seed);
        layer_set(lw, (llm_tensor)t, (llm_mat){p, LLM_F32});
    }
}

void llm_layer_weights_shard(llm_layer_weights *dst, const llm_layer_weights *src, const llm_config *cfg,
                             const llm_split *sp) {
    llm_split s = split_or_full(cfg, sp);
    for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
        int64_t rows, cols, r0, c0, whole_rows, whole_cols;
        shard_shape(cfg, &s, (llm_tensor)t, &rows, &cols, &r0, &c0);
        llm_tensor_shape(cfg, (llm_tensor)t, &whole_rows, &whole_cols);
        llm_mat from = layer_get(src, (llm_tensor)t);
        PL_CHECK(from.type == LLM_F32 || (c0 % LLM_QK == 0 && cols % LLM_QK == 0),
                 "llm_layer_weights_shard: a column cut inside a block of 32 quantised weights");
        size_t row_bytes = llm_mat_bytes(from.type, 1, cols), whole_row = llm_mat_bytes(from.type, 1, whole_cols);
        size_t skip = llm_mat_bytes(from.type, 1, c0);
        char *p = pl_malloc(row_bytes * (size_t)rows);
        const char *at = (const char *)llm_mat_rows(from, whole_cols, r0).data + skip;
        if (cols == whole_cols) /* a block of rows is contiguous */
            pl_copy(p, at, row_bytes * (size_t)rows, NULL);
        else
            for (int64_t r = 0; r < rows; r++) pl_copy(p + r * row_bytes, at + r * whole_row, row_bytes, NULL);
        layer_set(dst, (llm_tensor)t, (llm_mat){p, from.type});
    }
    pl_stream_sync(NULL);
}

void llm_layer_weights_free(llm_layer_weights *lw) {
    for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
        llm_mat m = layer_get(lw, (llm_tensor)t);
        if (m.data) pl_free(m.data);
        layer_set(lw, (llm_tensor)t, (llm_mat){NULL, LLM_F32});
    }
}

void llm_weights_random(llm_weights *w, const llm_config *cfg, uint64_t seed) {
    char err[256];
    if (llm_config_check(cfg, err, sizeof err)) pl_fatal(__FILE__, __LINE__, "llm_config_check", err);
    w->layers = calloc((size_t)cfg->n_layer, sizeof *w->layers);
    PL_CHECK(w->layers != NULL, "out of host memory");
    for (int l = 0; l < cfg->n_layer; l++) llm_layer_weights_random(&w->layers[l], cfg, NULL, l, seed);
    llm_tensor g[3] = {LLM_TOKEN_EMBD, LLM_OUTPUT_NORM, LLM_OUTPUT};
    float *made[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (g[i] == LLM_OUTPUT && cfg->tied_output) continue;
        int64_t rows, cols;
        llm_tensor_shape(cfg, g[i], &rows, &cols);
        made[i] = pl_malloc_floats((size_t)(rows * cols));
        llm_fill_random(pl_tensor_view(made[i], rows, cols), cfg, g[i], -1, 0, 0, seed);
    }
    w->token_embd = (llm_mat){made[0], LLM_F32};
    w->output_norm = made[1];
    w->output = cfg->tied_output ? w->token_embd : (llm_mat){made[2], LLM_F32};
}

void llm_weights_free(llm_weights *w, const llm_config *cfg) {
    if (w->layers)
        for (int l = 0; l < cfg->n_layer; l++) llm_layer_weights_free(&w->layers[l]);
    free(w->layers);
    if (w->output.data && w->output.data != w->token_embd.data) pl_free(w->output.data);
    if (w->token_embd.data) pl_free(w->token_embd.data);
    if (w->output_norm) pl_free(w->output_norm);
    memset(w, 0, sizeof *w);
}

size_t llm_weights_bytes(const llm_weights *w, const llm_config *cfg) {
    size_t b = 0;
    int64_t rows, cols;
    for (int l = 0; w->layers && l < cfg->n_layer; l++)
        for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
            llm_mat m = layer_get(&w->layers[l], (llm_tensor)t);
            llm_tensor_shape(cfg, (llm_tensor)t, &rows, &cols);
            if (m.data) b += llm_mat_bytes(m.type, rows, cols);
        }
    llm_tensor_shape(cfg, LLM_TOKEN_EMBD, &rows, &cols);
    if (w->token_embd.data) b += llm_mat_bytes(w->token_embd.type, rows, cols);
    if (w->output.data && w->output.data != w->token_embd.data) b += llm_mat_bytes(w->output.type, rows, cols);
    if (w->output_norm) b += (size_t)cols * sizeof(float);
    return b;
}

/* ================================================================================== */
/* KV cache and workspace                                                              */
/* ================================================================================== */

void llm_kv_cache_init(llm_kv_cache *c, const llm_config *cfg, const llm_split *sp, int n_seq_max, int n_ctx,
                       int layer0, int n_layers) {
    llm_split s = split_or_full(cfg, sp);
    int kv0;
    PL_CHECK(n_seq_max > 0 && n_ctx >= 0 && layer0 >= 0 && n_layers >= 0 && layer0 + n_layers <= cfg->n_layer,
             "llm_kv_cache_init: sequences, context or layer range out of bounds");
    c->n_seq_max = n_seq_max;
    c->n_ctx = n_ctx ? n_ctx : cfg->n_ctx;
    c->n_kv_heads = llm_split_kv_heads(cfg, &s, &kv0);
    c->head_dim = cfg->head_dim;
    c->layer0 = layer0;
    c->n_layers = n_layers;
    c->k = calloc((size_t)n_layers + 1, sizeof(float *));
    c->v = calloc((size_t)n_layers + 1, sizeof(float *));
    c->seq_len = calloc((size_t)n_seq_max, sizeof(int));
    PL_CHECK(c->k && c->v && c->seq_len, "out of host memory");
    size_t n = (size_t)n_seq_max * c->n_ctx * c->n_kv_heads * c->head_dim;
    for (int l = 0; l < n_layers; l++) {
        c->k[l] = pl_malloc_floats(n);
        c->v[l] = pl_malloc_floats(n);
    }
}

void llm_kv_cache_free(llm_kv_cache *c) {
    for (int l = 0; l < c->n_layers; l++) {
        pl_free(c->k[l]);
        pl_free(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c->seq_len);
    memset(c, 0, sizeof *c);
}

void llm_kv_cache_clear(llm_kv_cache *c, int seq) {
    for (int i = 0; i < c->n_seq_max; i++)
        if (seq < 0 || i == seq) c->seq_len[i] = 0;
}

size_t llm_kv_cache_bytes(const llm_kv_cache *c) {
    return 2 * sizeof(float) * (size_t)c->n_layers * c->n_seq_max * c->n_ctx * c->n_kv_heads * c->head_dim;
}

void llm_workspace_init(llm_workspace *ws, const llm_config *cfg, const llm_split *sp, int n_tokens_max) {
    llm_split s = split_or_full(cfg, sp);
    int kv0, n = n_tokens_max;
    PL_CHECK(n > 0, "llm_workspace_init: n_tokens_max must be positive");
    memset(ws, 0, sizeof *ws);
    ws->n_tokens_max = n;
    ws->n_embd = cfg->n_embd;
    ws->n_vocab = cfg->n_vocab;
    ws->n_q = s.n_head * cfg->head_dim;
    ws->n_kv = llm_split_kv_heads(cfg, &s, &kv0) * cfg->head_dim;
    ws->n_ff = s.n_ff;
    ws->d_ints = pl_malloc(4 * (size_t)n * sizeof(int));
    ws->h_ints = calloc(4 * (size_t)n, sizeof(int));
    PL_CHECK(ws->h_ints != NULL, "out of host memory");
    ws->tokens = ws->d_ints, ws->seq_id = ws->d_ints + n, ws->pos = ws->d_ints + 2 * n;
    ws->out_rows = ws->d_ints + 3 * n;
    size_t C = (size_t)cfg->n_embd;
    ws->x = pl_malloc_floats(n * C);
    ws->xn = pl_malloc_floats(n * C);
    ws->y = pl_malloc_floats(n * C);
    ws->xo = pl_malloc_floats(n * C);
    ws->q = pl_malloc_floats((size_t)n * ws->n_q);
    ws->att = pl_malloc_floats((size_t)n * ws->n_q);
    ws->k = pl_malloc_floats((size_t)n * ws->n_kv);
    ws->v = pl_malloc_floats((size_t)n * ws->n_kv);
    ws->gate = pl_malloc_floats((size_t)n * ws->n_ff);
    ws->up = pl_malloc_floats((size_t)n * ws->n_ff);
}

void llm_workspace_free(llm_workspace *ws) {
    float *f[] = {ws->x, ws->xn, ws->y, ws->xo, ws->q, ws->att, ws->k, ws->v, ws->gate, ws->up};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i]) pl_free(f[i]);
    if (ws->d_ints) pl_free(ws->d_ints);
    free(ws->h_ints);
    memset(ws, 0, sizeof *ws);
}

/* ================================================================================== */
/* The batch                                                                           */
/* ================================================================================== */

int llm_batch_prepare(llm_workspace *ws, llm_kv_cache *cache, const llm_config *cfg, const int *tokens,
                      const int *seq_ids, const int *positions, int n_tokens, int logits_mode) {
    ws->err[0] = '\0';
    if (n_tokens <= 0 || n_tokens > ws->n_tokens_max) {
        snprintf(ws->err, sizeof ws->err, "batch of %d tokens: the workspace takes 1 .. %d", n_tokens,
                 ws->n_tokens_max);
        return -1;
    }
    if (logits_mode != LLM_LOGITS_ALL && logits_mode != LLM_LOGITS_LAST) {
        snprintf(ws->err, sizeof ws->err, "unknown logits mode %d", logits_mode);
        return -1;
    }
    /* check against a copy of the sequence lengths; commit only a valid batch */
    int *len = malloc((size_t)cache->n_seq_max * sizeof(int));
    int *last = malloc((size_t)cache->n_seq_max * sizeof(int)); /* the batch's last token of each sequence */
    PL_CHECK(len && last, "out of host memory");
    memcpy(len, cache->seq_len, (size_t)cache->n_seq_max * sizeof(int));
    for (int i = 0; i < cache->n_seq_max; i++) last[i] = -1;
    int64_t attended = 0;
    for (int t = 0; t < n_tokens && !ws->err[0]; t++) {
        int sq = seq_ids[t], p = positions[t];
        if (tokens && (tokens[t] < 0 || tokens[t] >= cfg->n_vocab))
            snprintf(ws->err, sizeof ws->err, "token %d of the batch: id %d outside the vocabulary [0, %d)", t,
                     tokens[t], cfg->n_vocab);
        else if (sq < 0 || sq >= cache->n_seq_max)
            snprintf(ws->err, sizeof ws->err, "token %d of the batch: sequence %d outside [0, %d)", t, sq,
                     cache->n_seq_max);
        else if (p < 0 || p >= cache->n_ctx)
            snprintf(ws->err, sizeof ws->err, "token %d of the batch: position %d outside the context [0, %d)", t,
                     p, cache->n_ctx);
        else if (last[sq] >= 0 && p != len[sq])
            snprintf(ws->err, sizeof ws->err,
                     "token %d of the batch: sequence %d is at position %d here, so this token must be at %d, not %d",
                     t, sq, len[sq] - 1, len[sq], p);
        else if (p > len[sq])
            snprintf(ws->err, sizeof ws->err,
                     "token %d of the batch: position %d leaves a hole, sequence %d holds positions 0 .. %d", t, p,
                     sq, len[sq] - 1);
        if (ws->err[0]) break;
        len[sq] = p + 1;
        last[sq] = t;
        attended += p + 1;
    }
    if (ws->err[0]) {
        free(len);
        free(last);
        return -1;
    }
    memcpy(cache->seq_len, len, (size_t)cache->n_seq_max * sizeof(int));
    int n = ws->n_tokens_max, n_out = 0, *h = ws->h_ints;
    for (int t = 0; t < n_tokens; t++) {
        h[t] = tokens ? tokens[t] : 0;
        h[n + t] = seq_ids[t];
        h[2 * n + t] = positions[t];
        if (logits_mode == LLM_LOGITS_ALL || last[seq_ids[t]] == t) h[3 * n + n_out++] = t;
    }
    free(len);
    free(last);
    pl_upload(ws->d_ints, h, 4 * (size_t)n * sizeof(int));
    ws->n_tokens = n_tokens;
    ws->n_out = n_out;
    ws->logits_mode = logits_mode;
    ws->n_attended = attended;
    return n_out;
}

/* ================================================================================== */
/* The forward, in pieces                                                              */
/* ================================================================================== */

void llm_linear(float *y, int ldy, const float *x, int ldx, llm_mat W, int rows, int cols, int n_tokens,
                pl_stream *s) {
    if (W.type == LLM_F32)
        pl_gemm(false, true, n_tokens, rows, cols, 1.0f, x, ldx, (const float *)W.data, cols, 0.0f, y, ldy, s);
    else kern_qmatmul_forward(y, ldy, x, ldx, W.data, W.type, n_tokens, rows, cols, s);
}

/* One projection: the split's hook, or the rank's whole weight W [n_out, n_in]. */
static void project(const llm_split *sp, llm_tensor which, int layer, llm_mat W, float *y, const float *x,
                    int n_tokens, int n_out, int n_in, pl_stream *s) {
    if (sp->linear) {
        sp->linear(sp, which, layer, W, y, x, n_tokens, n_out, n_in, s);
        return;
    }
    PL_CHECK(W.data != NULL, "a projection without a weight (and no linear hook in the split)");
    llm_linear(y, n_out, x, n_in, W, n_out, n_in, n_tokens, s);
}

void llm_embed(const llm_config *cfg, const llm_weights *w, llm_workspace *ws, float *x, pl_stream *s) {
    PL_CHECK(w->token_embd.data != NULL, "llm_embed on a rank without the token embedding");
    if (w->token_embd.type == LLM_F32) kern_gather_rows(x, w->token_embd.data, ws->tokens, ws->n_tokens, cfg->n_embd, s);
    else kern_qget_rows(x, w->token_embd.data, w->token_embd.type, ws->tokens, ws->n_tokens, cfg->n_embd, s);
}

void llm_attention(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
                   llm_kv_cache *cache, llm_workspace *ws, float *y, const float *xn, pl_stream *s) {
    llm_split sl = split_or_full(cfg, sp);
    int kv0, n_kv = llm_split_kv_heads(cfg, &sl, &kv0), hd = cfg->head_dim, n = ws->n_tokens;
    int nq = sl.n_head * hd, nkv = n_kv * hd, C = cfg->n_embd;
    int l = layer - cache->layer0;
    PL_CHECK(l >= 0 && l < cache->n_layers, "llm_attention: the KV cache does not hold this layer");
    PL_CHECK(cache->n_kv_heads == n_kv && nq <= ws->n_q && nkv <= ws->n_kv,
             "llm_attention: the KV cache or the workspace was made for another split");
    project(&sl, LLM_WQ, layer, lw->wq, ws->q, xn, n, nq, C, s);
    project(&sl, LLM_WK, layer, lw->wk, ws->k, xn, n, nkv, C, s);
    project(&sl, LLM_WV, layer, lw->wv, ws->v, xn, n, nkv, C, s);
    kern_rope_forward(ws->q, ws->pos, n, sl.n_head, hd, cfg->rope_base, s);
    kern_rope_forward(ws->k, ws->pos, n, n_kv, hd, cfg->rope_base, s);
    kern_kv_store(cache->k[l], cache->v[l], ws->k, ws->v, ws->seq_id, ws->pos, n, n_kv, hd, cache->n_seq_max,
                  cache->n_ctx, s);
    kern_gqa_attention_forward(ws->att, ws->q, cache->k[l], cache->v[l], ws->seq_id, ws->pos, n, sl.n_head, n_kv,
                               hd, cache->n_seq_max, cache->n_ctx, 1.0f / sqrtf((float)hd), ws->n_attended, s);
    project(&sl, LLM_WO, layer, lw->wo, y, ws->att, n, C, nq, s);
}

void llm_ffn(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
             llm_workspace *ws, float *y, const float *xn, pl_stream *s) {
    llm_split sl = split_or_full(cfg, sp);
    int n = ws->n_tokens, C = cfg->n_embd, F = sl.n_ff;
    PL_CHECK(F <= ws->n_ff, "llm_ffn: the workspace was made for another split");
    project(&sl, LLM_W_GATE, layer, lw->w_gate, ws->gate, xn, n, F, C, s);
    project(&sl, LLM_W_UP, layer, lw->w_up, ws->up, xn, n, F, C, s);
    kern_swiglu_forward(ws->gate, ws->gate, ws->up, (size_t)n * F, s);
    project(&sl, LLM_W_DOWN, layer, lw->w_down, y, ws->gate, n, C, F, s);
}

void llm_layer_forward(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
                       llm_kv_cache *cache, llm_workspace *ws, float *x, pl_stream *s) {
    llm_split sl = split_or_full(cfg, sp);
    size_t nc = (size_t)ws->n_tokens * cfg->n_embd;
    kern_rmsnorm_forward(ws->xn, x, lw->attn_norm, ws->n_tokens, cfg->n_embd, cfg->rms_eps, s);
    llm_attention(cfg, lw, layer, &sl, cache, ws, ws->y, ws->xn, s);
    if (sl.reduce) sl.reduce(&sl, ws->y, nc, s);
    kern_residual_forward(x, x, ws->y, nc, s);
    kern_rmsnorm_forward(ws->xn, x, lw->ffn_norm, ws->n_tokens, cfg->n_embd, cfg->rms_eps, s);
    llm_ffn(cfg, lw, layer, &sl, ws, ws->y, ws->xn, s);
    if (sl.reduce) sl.reduce(&sl, ws->y, nc, s);
    kern_residual_forward(x, x, ws->y, nc, s);
}

int llm_head(const llm_config *cfg, const llm_weights *w, const llm_split *sp, llm_workspace *ws, const float *x,
             float *logits, pl_stream *s) {
    PL_CHECK(w->output_norm != NULL, "llm_head on a rank without the output norm");
    int rows = ws->n_out, C = cfg->n_embd;
    /* only the rows that get logits are normalised and projected: in decode and in a
     * prompt's last-token mode that is one row per sequence, not the whole batch */
    if (ws->logits_mode == LLM_LOGITS_ALL) kern_rmsnorm_forward(ws->xo, x, w->output_norm, rows, C, cfg->rms_eps, s);
    else {
        kern_gather_rows(ws->xo, x, ws->out_rows, rows, C, s);
        kern_rmsnorm_forward(ws->xo, ws->xo, w->output_norm, rows, C, cfg->rms_eps, s);
    }
    if (sp && sp->linear) sp->linear(sp, LLM_OUTPUT, -1, w->output, logits, ws->xo, rows, cfg->n_vocab, C, s);
    else {
        PL_CHECK(w->output.data != NULL, "llm_head on a rank without the output matrix");
        llm_linear(logits, cfg->n_vocab, ws->xo, C, w->output, cfg->n_vocab, C, rows, s);
    }
    return rows;
}

int llm_forward(const llm_config *cfg, const llm_weights *w, llm_kv_cache *cache, llm_workspace *ws,
                const int *tokens, const int *seq_ids, const int *positions, int n_tokens, float *logits,
                int logits_mode, pl_stream *s) {
    PL_CHECK(cache->layer0 == 0 && cache->n_layers == cfg->n_layer,
             "llm_forward needs a KV cache of every layer");
    if (llm_batch_prepare(ws, cache, cfg, tokens, seq_ids, positions, n_tokens, logits_mode) < 0) return -1;
    llm_embed(cfg, w, ws, ws->x, s);
    for (int l = 0; l < cfg->n_layer; l++) llm_layer_forward(cfg, &w->layers[l], l, NULL, cache, ws, ws->x, s);
    return llm_head(cfg, w, NULL, ws, ws->x, logits, s);
}
