// expect: wrong row.prefill
/* Broken on purpose: the main rank appends each rank's block of a product after the
 * previous one, as if the blocks were whole rows of y, instead of putting block [a, b) of
 * the weight's rows at column offset a of every token's row. One token (a decode step)
 * comes out right; a prompt does not. */
#define ls_init ls_init_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_init

static void row_linear_concatenated(const llm_split *sp, llm_tensor which, int layer, llm_mat W, float *y,
                                    const float *x, int n_tokens, int n_out, int n_in, pl_stream *s) {
    (void)layer, (void)n_out;
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
    for (int r = 0; r < st->n; r++) { /* the bug: block after block */
        int64_t a = rg[2 * r], m = rg[2 * r + 1] - a;
        if (m > 0)
            pl_copy(y + (size_t)n_tokens * a, st->stage + (size_t)st->T * a, (size_t)(n_tokens * m) * sizeof(float), s);
    }
}

int ls_init(ls_state **out, const llm_config *cfg, const ls_params *p, char *err, size_t errlen) {
    int rc = ls_init_solution(out, cfg, p, err, errlen);
    if (rc == LS_OK && (*out)->split.linear) (*out)->split.linear = row_linear_concatenated;
    return rc;
}
