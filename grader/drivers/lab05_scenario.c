/* lab05_scenario.c - the scenario every split runs, and its single-device reference.
 *
 * A prompt (one sequence, logits of every position), greedy decoding of g_gen tokens after
 * it, then a batch of g_batch sequences of different lengths prefilled together (sequence 0
 * rewinds to position 0) and g_decode decode steps of all of them. Rank 0 runs it once, before
 * any student code, with models/llama's single-device llm_forward on weights read and
 * dequantised to float32 by llm_load_gguf_f32 (not through ls_load: the student's forward
 * multiplies the stored blocks, so the reference is another evaluation of the same
 * products), and shares the logits with every rank; decoding is
 * teacher-forced: every split is fed the reference's greedy tokens and must pick the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

#define BATCH_TEXT "Once upon a time, a small robot learned to sing about the sea, the stars and the long road home."

lab5_scenario g_sc;

const char *uneven_split(int n) {
    static const char *fixed[] = {"", "1", "3,1", "1,0,2", "2,1,1,0"};
    static char more[4 * LS_MAX_RANKS];
    if (n <= 4) return fixed[n];
    int len = 0;
    for (int r = 0; r < n; r++) len += snprintf(more + len, sizeof more - (size_t)len, "%s%d", r ? "," : "", 1 + r % 2);
    return more;
}

int argmax_row(const float *row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* ================================================================================== */
/* The scenario and its reference                                                     */
/* ================================================================================== */

float *download_rows(const float *dev, int rows) {
    size_t n = (size_t)rows * g_cfg.n_vocab;
    float *h = malloc(n * sizeof(float));
    PL_CHECK(h != NULL, "out of host memory");
    pl_download(h, dev, n * sizeof(float));
    return h;
}

/* One reference forward on rank 0: rows of logits appended to *out. */
static void ref_step(const llm_weights *w, llm_kv_cache *kv, llm_workspace *ws, float *dev, const int *tok,
                     const int *seq, const int *pos, int n, int mode, float *out) {
    int rows = llm_forward(&g_cfg, w, kv, ws, tok, seq, pos, n, dev, mode, NULL);
    PL_CHECK(rows > 0, ws->err);
    float *h = download_rows(dev, rows);
    memcpy(out, h, (size_t)rows * g_cfg.n_vocab * sizeof(float));
    free(h);
}

static void reference(void) {
    size_t V = (size_t)g_cfg.n_vocab;
    char err[512] = "";
    llm_config rc;
    llm_weights w;
    double ok = g_me == 0 ? llm_load_gguf_f32(kit_path(), &rc, &w, err, sizeof err) == 0 : 1;
    pl_host_bcast(err, sizeof err, 0, NULL);
    if (drv_min(ok) == 0) pl_usage_error("the single-device reference cannot read the model: %s", err);
    if (g_me == 0) {
        llm_kv_cache kv;
        llm_workspace ws;
        llm_kv_cache_init(&kv, &g_cfg, NULL, g_sc.B, g_sc.n_ctx, 0, g_cfg.n_layer);
        llm_workspace_init(&ws, &g_cfg, NULL, g_sc.n_tok_max);
        float *dev = pl_malloc_floats((size_t)g_sc.n_tok_max * V);
        int *seq = calloc((size_t)g_sc.n_tok_max, sizeof(int)), *pos = calloc((size_t)g_sc.n_tok_max, sizeof(int));
        PL_CHECK(seq && pos, "out of host memory");
        for (int i = 0; i < g_sc.P; i++) pos[i] = i;
        ref_step(&w, &kv, &ws, dev, g_sc.prompt, seq, pos, g_sc.P, LLM_LOGITS_ALL, g_sc.ref_prompt);
        g_sc.gen[0] = argmax_row(g_sc.ref_prompt + (size_t)(g_sc.P - 1) * V, (int)V);
        for (int k = 0; k < g_sc.K; k++) {
            int p = g_sc.P + k;
            ref_step(&w, &kv, &ws, dev, &g_sc.gen[k], seq, &p, 1, LLM_LOGITS_LAST, g_sc.ref_gen + (size_t)k * V);
            g_sc.gen[k + 1] = argmax_row(g_sc.ref_gen + (size_t)k * V, (int)V);
        }
        ref_step(&w, &kv, &ws, dev, g_sc.btok, g_sc.bseq, g_sc.bpos, g_sc.bn, LLM_LOGITS_LAST, g_sc.ref_batch);
        for (int d = 0; d < g_sc.D; d++) {
            for (int s = 0; s < g_sc.B; s++) seq[s] = s, pos[s] = g_sc.blen[s] + d;
            ref_step(&w, &kv, &ws, dev, g_sc.dtok + (size_t)d * g_sc.B, seq, pos, g_sc.B, LLM_LOGITS_LAST,
                     g_sc.ref_decode + (size_t)d * g_sc.B * V);
        }
        free(seq), free(pos);
        pl_free(dev);
        llm_workspace_free(&ws);
        llm_kv_cache_free(&kv);
        llm_weights_free(&w, &rc);
    }
    pl_host_bcast(g_sc.gen, ((size_t)g_sc.K + 1) * sizeof(int), 0, NULL);
    float *arrays[4] = {g_sc.ref_prompt, g_sc.ref_gen, g_sc.ref_batch, g_sc.ref_decode};
    size_t rows[4] = {(size_t)g_sc.P, (size_t)g_sc.K, (size_t)g_sc.B, (size_t)g_sc.D * g_sc.B};
    for (int i = 0; i < 4; i++) pl_host_bcast(arrays[i], rows[i] * V * sizeof(float), 0, NULL);
}

void scenario_init(void) {
    g_sc.prompt = kit_tokens(g_prompt, false, &g_sc.P);
    if (g_sc.P < 1 || g_sc.P > 512) pl_usage_error("--prompt: %d tokens; the graded scenario takes 1 .. 512", g_sc.P);
    g_sc.K = g_gen, g_sc.B = g_batch, g_sc.D = g_decode;
    int N, longest = 0;
    int *text = kit_tokens(BATCH_TEXT, false, &N);
    g_sc.blen = malloc((size_t)g_sc.B * sizeof(int));
    g_sc.gen = calloc((size_t)g_sc.K + 1, sizeof(int));
    PL_CHECK(g_sc.blen && g_sc.gen, "out of host memory");
    g_sc.bn = 0;
    for (int s = 0; s < g_sc.B; s++) { /* lengths 2, 5, 3, 6, 4, 2, ...: sequences at different positions */
        g_sc.blen[s] = 2 + 3 * s % 5;
        g_sc.bn += g_sc.blen[s];
        longest = g_sc.blen[s] > longest ? g_sc.blen[s] : longest;
    }
    g_sc.btok = malloc((size_t)g_sc.bn * sizeof(int)), g_sc.bseq = malloc((size_t)g_sc.bn * sizeof(int));
    g_sc.bpos = malloc((size_t)g_sc.bn * sizeof(int)), g_sc.dtok = malloc((size_t)g_sc.D * g_sc.B * sizeof(int) + 1);
    PL_CHECK(g_sc.btok && g_sc.bseq && g_sc.bpos && g_sc.dtok, "out of host memory");
    for (int s = 0, t = 0; s < g_sc.B; s++)
        for (int i = 0; i < g_sc.blen[s]; i++, t++) g_sc.btok[t] = text[(s + i) % N], g_sc.bseq[t] = s, g_sc.bpos[t] = i;
    for (int d = 0; d < g_sc.D; d++)
        for (int s = 0; s < g_sc.B; s++) g_sc.dtok[d * g_sc.B + s] = text[(7 * s + 3 * d + 1) % N];
    free(text);
    /* room for the longest sequence, and for the invalid batch's hole to be a hole */
    g_sc.n_ctx = (g_sc.P + g_sc.K > longest + g_sc.D ? g_sc.P + g_sc.K : longest + g_sc.D) + 8;
    if (g_sc.n_ctx * 2 > g_cfg.n_ctx)
        pl_usage_error("the scenario needs %d positions, the model has %d", 2 * g_sc.n_ctx, g_cfg.n_ctx);
    g_sc.n_tok_max = g_sc.P > g_sc.bn ? g_sc.P : g_sc.bn;
    size_t V = (size_t)g_cfg.n_vocab;
    g_sc.ref_prompt = malloc((size_t)g_sc.P * V * sizeof(float));
    g_sc.ref_gen = malloc(((size_t)g_sc.K + 1) * V * sizeof(float));
    g_sc.ref_batch = malloc((size_t)g_sc.B * V * sizeof(float));
    g_sc.ref_decode = malloc(((size_t)g_sc.D * g_sc.B + 1) * V * sizeof(float));
    PL_CHECK(g_sc.ref_prompt && g_sc.ref_gen && g_sc.ref_batch && g_sc.ref_decode, "out of host memory");
    reference();
}

void scenario_free(void) {
    void *p[] = {g_sc.prompt, g_sc.gen, g_sc.btok, g_sc.bseq, g_sc.bpos, g_sc.blen,
                 g_sc.dtok, g_sc.ref_prompt, g_sc.ref_gen, g_sc.ref_batch, g_sc.ref_decode};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    memset(&g_sc, 0, sizeof g_sc);
}
