// expect: wrong tensor.prefill
/* Broken on purpose: a rank loads the K and V rows of KV head head0 % n_head_kv, as if query
 * heads were dealt to the KV heads in turn, instead of head0 / (n_head / n_head_kv): in llama
 * each KV head serves a block of consecutive query heads. */
#include "llama_split.h"

static int kv_heads_dealt_in_turn(const llm_config *cfg, const llm_split *sp, int *kv0) {
    int n = llm_split_kv_heads(cfg, sp, kv0);
    *kv0 = sp->head0 % cfg->n_head_kv; /* the bug */
    if (*kv0 + n > cfg->n_head_kv) *kv0 = cfg->n_head_kv - n;
    return n;
}
#define llm_split_kv_heads kv_heads_dealt_in_turn
#include "../../../solutions/05-llama-split/llama_split.c"
