// expect: wrong tensor.prefill
/* Broken on purpose: in the tensor-parallel layer, RoPE is applied to this rank's q and k
 * with the model's head counts (n_head, n_head_kv) instead of the rank's own: each token's
 * row of the shard is read as a row of every head, so tokens take their neighbours'
 * positions. One token (a decode step) comes out right; a prompt does not. The layer is
 * written out here so that the bug has a place to live; the other modes use the real one. */
#include <math.h>

#include "kern_gqa.h"      // defines: kern_kv_store, kern_gqa_attention_forward
#include "kern_residual.h" // defines: kern_residual_forward
#include "kern_rmsnorm.h"  // defines: kern_rmsnorm_forward
#include "kern_rope.h"     // defines: kern_rope_forward
#include "llama_split.h"

/* x [n, heads_local, hd] roped as if its rows held `heads_all` heads, through a buffer big
 * enough for that reading. */
static void rope_as_all_heads(float *x, const int *pos, int n, int heads_local, int heads_all, int hd, float theta,
                              pl_stream *s) {
    int rows = (n * heads_local + heads_all - 1) / heads_all;
    float *big = pl_malloc_floats((size_t)rows * heads_all * hd);
    pl_copy(big, x, (size_t)n * heads_local * hd * sizeof(float), s);
    kern_rope_forward(big, pos, rows, heads_all, hd, theta, s);
    pl_copy(x, big, (size_t)n * heads_local * hd * sizeof(float), s);
    pl_free(big);
}

static void layer_with_global_rope(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
                                   llm_kv_cache *cache, llm_workspace *ws, float *x, pl_stream *s) {
    if (!sp || !sp->reduce) {
        llm_layer_forward(cfg, lw, layer, sp, cache, ws, x, s);
        return;
    }
    int n = ws->n_tokens, C = cfg->n_embd, hd = cfg->head_dim, kv0, nkv = llm_split_kv_heads(cfg, sp, &kv0);
    int nq = sp->n_head * hd, nk = nkv * hd, l = layer - cache->layer0;
    size_t nc = (size_t)n * C;
    kern_rmsnorm_forward(ws->xn, x, lw->attn_norm, n, C, cfg->rms_eps, s);
    llm_linear(ws->q, nq, ws->xn, C, lw->wq, nq, C, n, s);
    llm_linear(ws->k, nk, ws->xn, C, lw->wk, nk, C, n, s);
    llm_linear(ws->v, nk, ws->xn, C, lw->wv, nk, C, n, s);
    rope_as_all_heads(ws->q, ws->pos, n, sp->n_head, cfg->n_head, hd, cfg->rope_base, s);  /* the bug */
    rope_as_all_heads(ws->k, ws->pos, n, nkv, cfg->n_head_kv, hd, cfg->rope_base, s);      /* and here */
    kern_kv_store(cache->k[l], cache->v[l], ws->k, ws->v, ws->seq_id, ws->pos, n, nkv, hd, cache->n_seq_max,
                  cache->n_ctx, s);
    kern_gqa_attention_forward(ws->att, ws->q, cache->k[l], cache->v[l], ws->seq_id, ws->pos, n, sp->n_head, nkv, hd,
                               cache->n_seq_max, cache->n_ctx, 1.0f / sqrtf((float)hd), ws->n_attended, s);
    llm_linear(ws->y, C, ws->att, nq, lw->wo, C, nq, n, s);
    sp->reduce(sp, ws->y, nc, s);
    kern_residual_forward(x, x, ws->y, nc, s);
    kern_rmsnorm_forward(ws->xn, x, lw->ffn_norm, n, C, cfg->rms_eps, s);
    llm_ffn(cfg, lw, layer, sp, ws, ws->y, ws->xn, s);
    sp->reduce(sp, ws->y, nc, s);
    kern_residual_forward(x, x, ws->y, nc, s);
}
#define llm_layer_forward layer_with_global_rope
#include "../../../solutions/05-llama-split/llama_split.c"
