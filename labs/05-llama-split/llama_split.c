/* llama_split.c - Lab 5: a llama over n ranks, the way llama.cpp splits it. YOUR FILE.
 *
 * Implement the functions declared in llama_split.h (read it and README.md first):
 *   the rules      ls_cuts, ls_layer_owner, ls_row_range, ls_tensor_split
 *   the model      ls_init, ls_forward, ls_free for LS_LAYER, LS_ROW and LS_TENSOR
 * Allowed: ls_type and ls_load (the only way to the weights: keep them in their type); the
 * forward's pieces of models/llama.h
 * (llm_batch_prepare, llm_embed, llm_layer_forward, llm_attention, llm_ffn, llm_head,
 * llm_linear, llm_kv_cache_*, llm_workspace_*, llm_split_*); pl_malloc/pl_free, pl_copy;
 * pl_send, pl_recv, pl_broadcast, pl_allreduce on p->comm; the kernels/ dispatchers. Use
 * the compute stream (NULL) everywhere. Shapes of every argument are in llama_split.h.
 *
 * As handed out, everything compiles and runs and every test fails cleanly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_split.h"

struct ls_state {
    int unused; /* TODO: the config, the mode, the weights this rank holds, its KV cache, a workspace */
};

int ls_cuts(const float *p, int n_props, int n, float *cuts) {
    (void)p, (void)n_props, (void)n, (void)cuts;
    return LS_ERR_SPLIT; /* TODO: llama.cpp's normalised prefix sums */
}

int ls_layer_owner(const float *cuts, int n, int n_layer, int slot) {
    (void)cuts, (void)n, (void)n_layer, (void)slot;
    return -1; /* TODO: upper_bound over cuts[1 .. n] */
}

void ls_row_range(const float *cuts, int n, int r, int64_t nrows, int64_t *row0, int64_t *row1) {
    (void)cuts, (void)n, (void)r, (void)nrows;
    *row0 = *row1 = 0; /* TODO: bounds from the cuts, rounded down to LS_ROW_ROUNDING */
}

int ls_tensor_split(const llm_config *cfg, int n, int r, llm_split *sp) {
    (void)cfg, (void)n, (void)r;
    memset(sp, 0, sizeof *sp);
    return LS_ERR_SPLIT; /* TODO: heads by KV groups, FFN features evenly */
}

int ls_init(ls_state **out, const llm_config *cfg, const ls_params *p, char *err, size_t errlen) {
    (void)cfg, (void)p;
    *out = NULL;
    snprintf(err, errlen, "ls_init is not implemented yet");
    return LS_ERR_MODE; /* TODO: weights (ls_load), KV cache and workspace of this rank */
}

int ls_forward(ls_state *st, const int *tokens, const int *seq_ids, const int *pos, int n_tokens, int logits_mode,
               float *logits, char *err, size_t errlen) {
    (void)st, (void)tokens, (void)seq_ids, (void)pos, (void)n_tokens, (void)logits_mode, (void)logits;
    snprintf(err, errlen, "ls_forward is not implemented yet");
    return -1; /* TODO: one forward of the batch, split by st's mode */
}

void ls_free(ls_state *st) { free(st); }
