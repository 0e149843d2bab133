// expect: wrong tensor.prefill
/* Broken on purpose: only the FFN's partial sums are all-reduced; the attention output
 * projection's (the first of the two calls of each layer) stays a partial sum of this
 * rank's heads. */
#define ls_init ls_init_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_init

static void allreduce_after_ffn_only(const llm_split *sp, float *y, size_t count, pl_stream *s) {
    static unsigned calls;
    if (calls++ % 2 == 0) return; /* the bug: the attention's all-reduce is skipped */
    tp_allreduce(sp, y, count, s);
}

int ls_init(ls_state **out, const llm_config *cfg, const ls_params *p, char *err, size_t errlen) {
    int rc = ls_init_solution(out, cfg, p, err, errlen);
    if (rc == LS_OK && (*out)->split.reduce) (*out)->split.reduce = allreduce_after_ffn_only;
    return rc;
}
