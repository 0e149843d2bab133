/* llama_split.h - Lab 5: llama.cpp-style inference of a llama over n ranks (do not edit; you
 * implement the functions declared at the bottom, in llama_split.c). README.md explains it.
 *
 * The model is a GGUF llama (SmolLM2-135M, or the project's tiny llama in the self-tests),
 * its forward is models/llama.h: llm_batch_prepare, llm_embed, llm_layer_forward (or
 * llm_attention + llm_ffn), llm_head. You spread it over the ranks three ways:
 *
 *   LS_LAYER   llama.cpp's default `-sm layer`: whole layers and their KV cache per rank,
 *              the hidden state [n_tokens, C] passed from rank to rank; a batch of several
 *              sequences is cut into micro-batches that follow each other down the ranks.
 *   LS_ROW     the classic `-sm row`: the rows of every weight matrix divided over the
 *              ranks; rank 0 (the main rank) runs everything else and keeps the KV cache;
 *              for each matmul it broadcasts the activation, every rank computes its rows,
 *              rank 0 gathers them at their row offsets.
 *   LS_TENSOR  tensor parallelism (`-sm tensor`, Megatron): query heads and their KV heads
 *              split over the ranks, FFN features too; the attention output and the FFN
 *              down projection are partial sums, all-reduced (two per layer); the KV cache
 *              is sharded by head.
 * All three give the single-device logits (relative error <= 1e-5 on the cpu device, the
 * single-device forward being the one on float32-dequantised weights).
 *
 * Shapes: C = n_embd, Q = n_head * head_dim, KV = n_head_kv * head_dim, F = n_ff,
 * V = n_vocab, L = n_layer. Weights are [out, in] row-major (llama.h): "rows" of a matrix
 * are its output features. Matrices stay in the file's type (llm_mat: float32, or Q4_0 /
 * Q4_1 / Q8_0 blocks of 32 weights along a row); llm_linear multiplies either.
 */
#ifndef LLAMA_SPLIT_H
#define LLAMA_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h" // defines: llm_config, llm_split, llm_tensor and the forward's pieces
#include "pl.h"

#define LS_MAX_RANKS 16     /* llama.cpp's GGML_CUDA_MAX_DEVICES                           */
#define LS_ROW_ROUNDING 128 /* row split: bounds are multiples of it (llama.cpp on recent
                               NVIDIA GPUs)                                                */

enum {
    LS_OK = 0,
    LS_ERR_SPLIT = 1, /* bad proportions (negative, NaN, infinite, more than n), a bad n, or
                         a tensor split with more ranks than query heads                    */
    LS_ERR_MODE = 2,  /* unknown mode, a size that is not positive, or not implemented     */
    LS_ERR_LOAD = 3,  /* ls_load refused a block                                           */
    LS_ERR_BATCH = 4  /* ls_forward: the batch is invalid (llm_batch_prepare's message)   */
};

typedef enum { LS_LAYER = 0, LS_ROW = 1, LS_TENSOR = 2 } ls_mode;

/* ===================================================================================== */
/* The kit (the grader defines it; you call it)                                          */
/* ===================================================================================== */

/* The type the model holds tensor `which` of `layer` in (-1 for the global tensors):
 * LLM_Q4_0, LLM_Q4_1 or LLM_Q8_0 for a matrix the file stores in those blocks (SmolLM2:
 * every projection Q4_1, token_embd Q8_0), LLM_F32 for the rest (F32, F16, the norms).
 * -1 for a tensor or layer that does not exist. */
int ls_type(llm_tensor which, int layer);

/* Rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of the model's tensor `which`
 * (of layer `layer`; -1 for token_embd, output_norm and output) into dst, a device buffer
 * of llm_mat_bytes(type, nrows, ncols) bytes you allocated (pl_malloc), dense row-major:
 *   type == ls_type(which, layer)  the stored blocks, as they are (a quantised type needs
 *                                  col0 and ncols multiples of LLM_QK = 32: whole blocks);
 *   type == LLM_F32                the block dequantised to float32 (the fallback for a cut
 *                                  inside a block: 4 bytes per weight instead of 0.56).
 * LLM_OUTPUT of a model with a tied output (SmolLM2) reads token_embd. This is the only
 * way to the weights, and the bytes it writes on a rank are what the grader counts as that
 * rank's weight bytes. Returns 0, or -1 when the block is not inside the tensor, the type
 * is neither of the two, or a quantised block is cut inside (a line on stderr says why). */
int ls_load(llm_tensor which, int layer, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols, int type,
            void *dst);

/* ===================================================================================== */
/* What you implement (llama_split.c)                                                    */
/* ===================================================================================== */

/* ---- the rules (no communication, no memory: the grader calls them directly) ---------- */

/* llama.cpp's --tensor-split: proportions p[0 .. n_props) of ranks 0 .. n_props-1, the
 * ranks after them 0 (n_props 0, or every p zero: equal proportions, as if all were 1).
 * cuts[0 .. n] are the normalised prefix sums, computed in float in this order:
 *     acc = 0; cuts[0] = 0; for r in 0 .. n-1: acc += p[r]; cuts[r + 1] = acc / sum
 * (sum = acc at the end, so cuts[n] = 1): rank r's share is [cuts[r], cuts[r + 1]).
 * LS_OK, or LS_ERR_SPLIT (n outside [1, LS_MAX_RANKS], n_props outside [0, n], a
 * proportion negative, NaN or infinite, or a sum that overflows). */
int ls_cuts(const float *p, int n_props, int n, float *cuts);

/* Layer split: the rank of slot `slot` of L + 1 slots, slot L being the output layer
 * (output norm and matrix), by llama.cpp's rule: the first r in [0, n) with
 *     (float)slot / (float)(L + 1) < cuts[r + 1]
 * (std::upper_bound over cuts[1 .. n]). The token embedding lives on rank 0. */
int ls_layer_owner(const float *cuts, int n, int n_layer, int slot);

/* Row split of a matrix of nrows rows: rank r owns rows [*row0, *row1):
 *     row0 = r == 0     ? 0     : (int64_t)(nrows * cuts[r])       (float product)
 *     row1 = r == n - 1 ? nrows : (int64_t)(nrows * cuts[r + 1])
 * each bound but nrows rounded down to a multiple of LS_ROW_ROUNDING (so a rank may own
 * 0 rows, and the last one takes what rounding leaves). */
void ls_row_range(const float *cuts, int n, int r, int64_t nrows, int64_t *row0, int64_t *row1);

/* Tensor split: rank r's query heads [head0, head0 + n_head) and FFN features
 * [ff0, ff0 + n_ff) into sp (linear, reduce and ctx set to NULL). Even shards, whatever
 * the proportions; with g = n_head / n_head_kv query heads per KV head:
 *   n <= n_head_kv: rank r gets the KV groups [r*n_head_kv/n, (r+1)*n_head_kv/n) (integer
 *                   division) and all their query heads;
 *   n >  n_head_kv: rank r is in group k = r*n_head_kv/n; that group's ranks a .. b-1 (the
 *                   r with the same k) divide its g heads: rank r gets heads
 *                   k*g + [(r-a)*g/(b-a), (r-a+1)*g/(b-a)), and the KV head k is replicated
 *                   on those ranks;
 *   FFN features [r*F/n, (r+1)*F/n).
 * LS_OK, or LS_ERR_SPLIT when n > n_head (a rank would get no head) or n > F. */
int ls_tensor_split(const llm_config *cfg, int n, int r, llm_split *sp);

/* ---- the split model ---------------------------------------------------------------------- */

typedef struct {
    ls_mode mode;
    const float *tensor_split; /* proportions (ls_cuts); NULL with n_split 0: equal       */
    int n_split;
    int n_seq_max;    /* sequences the KV cache holds                                     */
    int n_ctx;        /* positions per sequence                                           */
    int n_tokens_max; /* the largest batch one ls_forward gets                            */
    int n_micro;      /* layer split: a batch of S sequences goes down the ranks as
                         min(n_micro, S) micro-batches (>= 1)                              */
    pl_comm *comm;    /* the ranks of the split (every rank of it calls every function)   */
} ls_params;

/* Your per-rank state; you define struct ls_state in llama_split.c. */
typedef struct ls_state ls_state;

/* Collective over p->comm: check the parameters (every rank reaches the same verdict without
 * asking the others), then allocate and load (with ls_load) only what this rank holds in
 * p->mode:
 *   layer   its layers, their KV cache; rank 0 the token embedding, the owner of slot L the
 *           output norm and matrix (a rank that holds the tied embedding reuses it)
 *   row     its rows of every matrix (the 7 of each layer and the output); rank 0 also the
 *           norms, the embedding and the whole KV cache
 *   tensor  its shards (ls_tensor_split; wq/wk/wv/w_gate/w_up by rows, wo/w_down by
 *           columns), the norms and the embedding; the KV cache of its KV heads; rank 0 the
 *           output norm and matrix
 * and the workspace for n_tokens_max tokens. *out = the state, and LS_OK; or an LS_ERR_*
 * with one line in err, *out = NULL and nothing left allocated (the same code on every
 * rank for bad parameters). */
int ls_init(ls_state **out, const llm_config *cfg, const ls_params *p, char *err, size_t errlen);

/* Collective: every rank the same batch (host arrays of n_tokens; each sequence's tokens
 * contiguous and in position order; llm_batch_prepare's rules). logits is a device buffer
 * of n_tokens * V floats on every rank; the logits rows (LLM_LOGITS_ALL: one per token,
 * LLM_LOGITS_LAST: one per sequence, its last token, in batch order) are written on the
 * output rank only: the owner of slot L in layer split, rank 0 in row and tensor split.
 * Returns the number of rows on every rank, or -1 on every rank (err set) for an invalid
 * batch. */
int ls_forward(ls_state *st, const int *tokens, const int *seq_ids, const int *pos, int n_tokens,
               int logits_mode, float *logits, char *err, size_t errlen);

/* Free everything ls_init allocated; NULL does nothing. */
void ls_free(ls_state *st);

#endif
