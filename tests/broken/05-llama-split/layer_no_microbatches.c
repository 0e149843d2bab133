// expect: wrong layer.traffic
/* Broken on purpose: a batch of several sequences goes down the ranks in one piece instead of
 * min(n_micro, S) micro-batches, so the ranks never work at the same time: the logits are
 * right, the messages per boundary are not. */
#define ls_init ls_init_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_init
int ls_init(ls_state **out, const llm_config *cfg, const ls_params *p, char *err, size_t errlen) {
    int rc = ls_init_solution(out, cfg, p, err, errlen);
    if (rc == LS_OK) (*out)->n_micro = 1; /* the bug */
    return rc;
}
