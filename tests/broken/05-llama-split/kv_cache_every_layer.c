// expect: wrong layer.kvcache
/* Broken on purpose: every rank allocates the KV cache of every layer (and in row split the
 * other ranks too), not only of the layers it runs: the logits are right, but each rank holds
 * the whole model's cache. */
#include "llama_split.h"

static void kv_cache_of_every_layer(llm_kv_cache *c, const llm_config *cfg, const llm_split *sp, int n_seq_max,
                                    int n_ctx, int layer0, int n_layers) {
    (void)layer0, (void)n_layers;
    llm_kv_cache_init(c, cfg, sp, n_seq_max, n_ctx, 0, cfg->n_layer);
}
#define llm_kv_cache_init kv_cache_of_every_layer
#include "../../../solutions/05-llama-split/llama_split.c"
