/* llama.h - the reference llama forward for inference (SmolLM2, llama 2/3 shapes), built
 * from kernels/ and pl_gemm, in pieces that a split over ranks can reuse.
 *
 * One layer, on hidden states x [n_tokens, C] (a token per row, C = n_embd):
 *   xn = rmsnorm(x) * attn_norm
 *   q = xn Wq^T, k = xn Wk^T, v = xn Wv^T        (heads side by side: [n_tokens, heads, hd])
 *   rope(q), rope(k) at each token's position    (adjacent pairs, kernels/kern_rope.h)
 *   K, V cache rows of (seq, pos) = k, v         (kernels/kern_gqa.h draws the layout)
 *   a = softmax(q K^T / sqrt(hd)) V over positions 0 .. pos of the token's sequence,
 *       query head h reading KV head h / (n_head / n_head_kv)
 *   x = x + a Wo^T
 *   xn = rmsnorm(x) * ffn_norm
 *   x = x + (silu(xn Wgate^T) * (xn Wup^T)) Wdown^T
 * then logits = rmsnorm(x) * output_norm  Woutput^T, and x starts as the token embeddings.
 *
 * Weight matrices are device tensors stored [out, in] row-major (PyTorch's nn.Linear, and
 * GGUF's ne = {in, out}), each in its own type (llm_mat): float32, where y = x W^T is
 * pl_gemm(false, true, ...), or GGUF's Q4_0 / Q4_1 / Q8_0 blocks of 32 weights along a row,
 * where it is kern_qmatmul_forward (kernels/kern_qmatmul.h), the weights dequantised inside
 * the dot product. Either way a block of output features is a block of contiguous rows.
 * The norms are float32 vectors. Docs: docs/models.md.
 *
 * The three ways Lab 5 spreads the model over ranks reuse these functions:
 *   layer split  a rank runs llm_layer_forward for its layers (llm_embed on the first,
 *                llm_head on the last) and holds the KV cache of those layers only;
 *   row split    every projection goes through llm_split.linear, which may compute a block
 *                of the weight's rows on each rank and gather them (llm_linear takes views);
 *   tensor par.  llm_split names the rank's query heads and FFN rows, its weights are those
 *                shards (llm_layer_weights_random / _shard make them), and llm_split.reduce
 *                all-reduces the partial sums of the two output projections.
 */
#ifndef LLAMA_H
#define LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_qmatmul.h" // defines: KERN_Q4_0, KERN_Q4_1, KERN_Q8_0, KERN_QK
#include "pl_device.h"    // defines: pl_stream, pl_gemm
#include "pl_tensor.h"    // defines: pl_tensor (weight views)

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the model's shape --------------------------------------------------------------- */
typedef struct {
    int n_layer;      /* transformer blocks                                             */
    int n_embd;       /* C, the hidden width                                            */
    int n_ff;         /* F, the FFN width                                               */
    int n_head;       /* query heads                                                    */
    int n_head_kv;    /* key/value heads (divides n_head; equal for plain multi-head)   */
    int head_dim;     /* hd, even (rope pairs); n_head * hd need not equal C            */
    int n_vocab;      /* V                                                              */
    int n_ctx;        /* the longest context the model was trained for                  */
    float rope_base;  /* rope frequency base theta                                      */
    float rms_eps;
    bool tied_output; /* the output matrix is the token embedding (SmolLM2)             */
} llm_config;

/* 0, or -1 with one line in err naming the first impossible value. */
int llm_config_check(const llm_config *cfg, char *err, size_t errlen);

/* Every tensor of the model; the first nine exist once per layer. */
typedef enum {
    LLM_ATTN_NORM, /* [C]                                  */
    LLM_WQ,        /* [n_head * hd, C]                     */
    LLM_WK,        /* [n_head_kv * hd, C]                  */
    LLM_WV,        /* [n_head_kv * hd, C]                  */
    LLM_WO,        /* [C, n_head * hd]                     */
    LLM_FFN_NORM,  /* [C]                                  */
    LLM_W_GATE,    /* [F, C]                               */
    LLM_W_UP,      /* [F, C]                               */
    LLM_W_DOWN,    /* [C, F]                               */
    LLM_TOKEN_EMBD,/* [V, C]                               */
    LLM_OUTPUT_NORM,/* [C]                                 */
    LLM_OUTPUT,    /* [V, C]                               */
    LLM_N_TENSORS
} llm_tensor;
#define LLM_N_LAYER_TENSORS 9

/* Rows x cols of the whole (unsplit) tensor; vectors are 1 x n. */
void llm_tensor_shape(const llm_config *cfg, llm_tensor which, int64_t *rows, int64_t *cols);
/* llama.cpp's name for it ("blk.3.attn_q.weight", "token_embd.weight"), into buf. */
const char *llm_tensor_gguf_name(llm_tensor which, int layer, char *buf, size_t len);

/* ---- a weight matrix in its stored type ------------------------------------------------- */
enum { LLM_F32 = 0, LLM_Q4_0 = KERN_Q4_0, LLM_Q4_1 = KERN_Q4_1, LLM_Q8_0 = KERN_Q8_0 };
#define LLM_QK KERN_QK /* weights per block of the quantised types, along a row */

typedef struct {
    void *data; /* device: rows x cols floats (LLM_F32), or rows of cols / 32 blocks; NULL: absent */
    int type;   /* LLM_F32, LLM_Q4_0, LLM_Q4_1, LLM_Q8_0                                          */
} llm_mat;

/* Bytes of a rows x cols matrix of `type` (cols a multiple of LLM_QK for a quantised type);
 * 0 for an unknown type. */
size_t llm_mat_bytes(int type, int64_t rows, int64_t cols);
/* Rows row0 .. of m (a matrix of cols columns): the same type, its data moved on. */
llm_mat llm_mat_rows(llm_mat m, int64_t cols, int64_t row0);
/* "f32", "q4_0", "q4_1", "q8_0" */
const char *llm_type_name(int type);

/* ---- how a rank takes part in a layer ------------------------------------------------------ */
typedef struct llm_split llm_split;
/* y[n_tokens, n_out] = x[n_tokens, n_in] W^T for matrix `which` of `layer` (-1 for
 * LLM_OUTPUT); W is the rank's weight from its llm_layer_weights / llm_weights (W.data NULL
 * if the rank keeps that matrix elsewhere, e.g. in ctx). */
typedef void (*llm_linear_fn)(const llm_split *sp, llm_tensor which, int layer, llm_mat W,
                              float *y, const float *x, int n_tokens, int n_out, int n_in,
                              pl_stream *s);
/* The partial sums y[count] of a layer's attention output projection or of its FFN down
 * projection, to be summed over the tensor-parallel group in place (an all-reduce). */
typedef void (*llm_reduce_fn)(const llm_split *sp, float *y, size_t count, pl_stream *s);

struct llm_split {
    int head0, n_head; /* query heads [head0, head0 + n_head) of the model's n_head     */
    int ff0, n_ff;     /* FFN features [ff0, ff0 + n_ff) of the model's n_ff             */
    llm_linear_fn linear; /* NULL: llm_linear with the rank's weight                     */
    llm_reduce_fn reduce; /* NULL: the partial sums are already whole                    */
    void *ctx;            /* for the hooks                                               */
};

/* The whole layer on one rank, no hooks. */
llm_split llm_split_full(const llm_config *cfg);
/* Heads must be whole KV groups (head0 and n_head multiples of n_head / n_head_kv) or lie
 * inside one group (then that KV head is replicated on the ranks that share it); the FFN
 * range inside [0, F). 0, or -1 with one line in err. */
int llm_split_check(const llm_config *cfg, const llm_split *sp, char *err, size_t errlen);
/* The KV heads the rank's query heads read: [*kv0, *kv0 + return value). */
int llm_split_kv_heads(const llm_config *cfg, const llm_split *sp, int *kv0);

/* ---- weights ----------------------------------------------------------------------------
 * A layer's tensors on one rank; for a split layer (tensor parallelism) they are dense
 * shards of the whole tensors:
 *   wq      [n_head_r * hd, C]    rows of the rank's query heads
 *   wk, wv  [n_kv_r * hd, C]      rows of its KV heads (llm_split_kv_heads)
 *   wo      [C, n_head_r * hd]    the matching columns
 *   w_gate, w_up [n_ff_r, C]      rows ff0 ..
 *   w_down  [C, n_ff_r]           the matching columns
 *   attn_norm, ffn_norm [C]       whole */
typedef struct {
    float *attn_norm, *ffn_norm;
    llm_mat wq, wk, wv, wo, w_gate, w_up, w_down;
} llm_layer_weights;

typedef struct {
    llm_layer_weights *layers; /* [n_layer] host array; layers a rank does not hold are NULL */
    llm_mat token_embd;        /* [V, C]                                                      */
    float *output_norm;        /* [C]                                                         */
    llm_mat output;            /* [V, C]; the same data as token_embd when the config ties them */
} llm_weights;

/* Block [row0, row0 + dst.rows) x [col0, col0 + dst.cols) of the random master tensor
 * `which` (layer ignored for the global tensors), from the counter RNG: every rank can
 * build any shard with the bits the whole tensor has. Matrices uniform with standard
 * deviation 1/sqrt(in), norms uniform in [0.8, 1.2], the embedding uniform in [-1, 1]. */
void llm_fill_random(pl_tensor dst, const llm_config *cfg, llm_tensor which, int layer, int64_t row0,
                     int64_t col0, uint64_t seed);
/* Allocate and fill one layer's weights as the rank of split sp holds them (NULL: whole). */
void llm_layer_weights_random(llm_layer_weights *lw, const llm_config *cfg, const llm_split *sp,
                              int layer, uint64_t seed);
/* Allocate dst and copy into it the shards of split sp from a whole layer src, in its types
 * (a quantised matrix cut by columns: at multiples of 32, or a fatal error). */
void llm_layer_weights_shard(llm_layer_weights *dst, const llm_layer_weights *src, const llm_config *cfg,
                             const llm_split *sp);
void llm_layer_weights_free(llm_layer_weights *lw);
/* The whole model from the counter RNG (output tied to the embedding when cfg says so). */
void llm_weights_random(llm_weights *w, const llm_config *cfg, uint64_t seed);
/* Read a GGUF llama (general.architecture "llama"): its config into *cfg, and every tensor
 * into device memory (models/llama_gguf.c): Q4_0, Q4_1 and Q8_0 matrices in their blocks,
 * F16 and F32 ones as float32. 0, or -1 with one line in err (file, format, shape or type
 * problem); nothing is left allocated on failure. */
int llm_load_gguf(const char *path, llm_config *cfg, llm_weights *w, char *err, size_t errlen);
/* The same with every matrix dequantised to float32: the forward the quantised one is
 * compared with (the weights' values are the same; only the products' rounding differs). */
int llm_load_gguf_f32(const char *path, llm_config *cfg, llm_weights *w, char *err, size_t errlen);
/* The same for a rank that holds only layers [layer0, layer0 + n_layers), the token
 * embedding when embd, the output norm and matrix when head (layer split: the first rank
 * embeds, the last has the head; a tied head gets its own copy of the embedding when the
 * rank does not embed). n_layers -1: through the last layer. Everything else stays NULL.
 * f32: every matrix dequantised to float32. */
int llm_load_gguf_part(const char *path, llm_config *cfg, llm_weights *w, int layer0, int n_layers, bool embd,
                       bool head, bool f32, char *err, size_t errlen);
/* Device bytes of the weights present (the tied output counted once). */
size_t llm_weights_bytes(const llm_weights *w, const llm_config *cfg);
/* Frees every tensor present and the layer array (the tied output once). */
void llm_weights_free(llm_weights *w, const llm_config *cfg);

/* ---- KV cache ---------------------------------------------------------------------------- */
typedef struct {
    int n_seq_max, n_ctx;   /* sequences and positions per sequence                        */
    int n_kv_heads, head_dim;/* the rank's KV heads                                        */
    int layer0, n_layers;   /* it holds layers [layer0, layer0 + n_layers)                 */
    float **k, **v;         /* [n_layers] device tensors [n_seq_max, n_ctx, n_kv_heads, hd] */
    int *seq_len;           /* [n_seq_max] host: positions 0 .. seq_len-1 hold a token       */
} llm_kv_cache;

/* sp NULL: all KV heads. n_ctx 0: cfg->n_ctx. */
void llm_kv_cache_init(llm_kv_cache *c, const llm_config *cfg, const llm_split *sp, int n_seq_max,
                       int n_ctx, int layer0, int n_layers);
void llm_kv_cache_free(llm_kv_cache *c);
/* Forget sequence seq (-1: all): its next token must be at position 0. */
void llm_kv_cache_clear(llm_kv_cache *c, int seq);
/* Device bytes of K and V over the cache's layers. */
size_t llm_kv_cache_bytes(const llm_kv_cache *c);

/* ---- workspace: the batch and the activations, allocated once for n_tokens_max ------------ */
enum { LLM_LOGITS_ALL = 0, LLM_LOGITS_LAST = 1 };

typedef struct {
    int n_tokens_max;
    int n_embd, n_vocab;       /* for the checks of later calls                           */
    int n_q, n_kv, n_ff;       /* the split's widths n_head_r*hd, n_kv_r*hd, n_ff_r: a
                                  linear hook must not widen the projections past them    */
    /* the current batch (llm_batch_prepare) */
    int n_tokens, n_out, logits_mode;
    int64_t n_attended;        /* sum of (pos + 1): sizes the attention's trace record     */
    int *d_ints;               /* device: tokens | seq_id | pos | out_rows, n_tokens_max each */
    int *tokens, *seq_id, *pos, *out_rows; /* views into d_ints                            */
    int *h_ints;               /* host staging of the same                                 */
    /* activations, device */
    float *x;                  /* [n, C]   the residual stream (llm_forward)               */
    float *xn;                 /* [n, C]   normalised input of a block                      */
    float *q, *att;            /* [n, n_q]                                                  */
    float *k, *v;              /* [n, n_kv]                                                 */
    float *y;                  /* [n, C]   a block's output before the residual            */
    float *gate, *up;          /* [n, n_ff]                                                 */
    float *xo;                 /* [n, C]   rows that get logits                             */
    char err[256];             /* the last llm_batch_prepare / llm_forward error            */
} llm_workspace;

/* sp NULL: the whole layer. */
void llm_workspace_init(llm_workspace *ws, const llm_config *cfg, const llm_split *sp, int n_tokens_max);
void llm_workspace_free(llm_workspace *ws);

/* Check a batch and make it current: tokens in [0, V) (tokens may be NULL on a rank that
 * does not embed), seq_ids in [0, n_seq_max), positions in [0, n_ctx), and every token
 * continues its sequence: its position is at most the cache's seq_len (position p
 * < seq_len rewinds the sequence to p), and a sequence's tokens in one batch are at
 * consecutive increasing positions. Updates cache->seq_len and uploads the batch.
 * Returns the number of logits rows the head will write: n_tokens (LLM_LOGITS_ALL), or
 * one per sequence in the batch, for its last token, in batch order (LLM_LOGITS_LAST);
 * -1 with ws->err set (nothing changed) on bad input. Every rank of a split calls it. */
int llm_batch_prepare(llm_workspace *ws, llm_kv_cache *cache, const llm_config *cfg, const int *tokens,
                      const int *seq_ids, const int *positions, int n_tokens, int logits_mode);

/* ---- the pieces of the forward (after llm_batch_prepare; device pointers) ---------------- */
/* y[n, :rows] = x[n, :cols] W^T for a weight W [rows, cols] (a block of output features:
 * llm_mat_rows); ldy, ldx the row strides of y and x. pl_gemm for float32, kern_qmatmul for
 * the quantised types. */
void llm_linear(float *y, int ldy, const float *x, int ldx, llm_mat W, int rows, int cols, int n_tokens,
                pl_stream *s);
/* x[n, C] = the batch's token embeddings. */
void llm_embed(const llm_config *cfg, const llm_weights *w, llm_workspace *ws, float *x, pl_stream *s);
/* y[n, C] = the attention of the split's heads on xn[n, C] (normalised), through the
 * output projection: a partial sum when the split holds some heads. Writes layer's cache. */
void llm_attention(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
                   llm_kv_cache *cache, llm_workspace *ws, float *y, const float *xn, pl_stream *s);
/* y[n, C] = the FFN of the split's features on xn[n, C] (a partial sum when split). */
void llm_ffn(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
             llm_workspace *ws, float *y, const float *xn, pl_stream *s);
/* x[n, C] = layer(x), in place: both blocks with their norms, reductions and residuals.
 * sp NULL: the whole layer. */
void llm_layer_forward(const llm_config *cfg, const llm_layer_weights *lw, int layer, const llm_split *sp,
                       llm_kv_cache *cache, llm_workspace *ws, float *x, pl_stream *s);
/* logits[rows, V] from x[n, C]: final norm and output projection of the rows the batch's
 * logits mode picks; returns rows (ws->n_out). sp NULL or its linear hook NULL: the whole
 * vocabulary with llm_linear. */
int llm_head(const llm_config *cfg, const llm_weights *w, const llm_split *sp, llm_workspace *ws,
             const float *x, float *logits, pl_stream *s);

/* The whole forward on one device: llm_batch_prepare, llm_embed, every layer, llm_head.
 * tokens, seq_ids, positions are host arrays of n_tokens; logits is a device array with
 * room for the rows the mode gives (n_tokens at most). Returns those rows, or -1 with
 * ws->err set when the batch is invalid (nothing is computed). */
int llm_forward(const llm_config *cfg, const llm_weights *w, llm_kv_cache *cache, llm_workspace *ws,
                const int *tokens, const int *seq_ids, const int *positions, int n_tokens, float *logits,
                int logits_mode, pl_stream *s);

#ifdef __cplusplus
}
#endif

#endif
