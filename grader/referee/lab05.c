/* lab05.c (referee) - Lab 5's referee state: the model as the referee reads it, the scenario
 * every split runs, and its single-device reference.
 *
 * The scenario: a prompt (one sequence, logits of every position), greedy decoding of --gen
 * tokens after it, then a batch of --batch sequences of different lengths prefilled together
 * (sequence 0 rewinds to position 0) and --decode decode steps of all of them. A referee
 * whose rank holds the logits in some mode (rank 0 for row and tensor split, the output
 * slot's owner for layer split, equal and uneven) runs it once, before its player exists,
 * with models/llama's single-device llm_forward on weights it read and dequantised to float32
 * itself (llm_load_gguf_f32: not through ls_load; the student's forward multiplies the stored
 * blocks, so the reference is another evaluation of the same products), and keeps those
 * weights for M.generate's timed runs. Decoding is teacher-forced: every split is fed the
 * reference's greedy tokens (rank 0's, relayed to the other referees) and must pick the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05_referee.h"

static lab5_referee g_ref5;
lab5_referee *lab5_ref(void) { return &g_ref5; }

void lab5_forget_file(lab5_referee *R) { lab5_model_forget(&R->model); }

/* ================================================================================== */
/* The reference                                                                      */
/* ================================================================================== */

/* One reference forward: rows of logits appended to out. */
static void ref_step(lab5_referee *R, llm_kv_cache *kv, llm_workspace *ws, float *dev, const int *tok, const int *seq,
                     const int *pos, int n, int mode, float *out) {
    int rows = llm_forward(&R->wcfg, &R->w, kv, ws, tok, seq, pos, n, dev, mode, NULL);
    PL_CHECK(rows > 0, ws->err);
    pl_download(out, dev, (size_t)rows * R->wcfg.n_vocab * sizeof(float));
}

static void reference(lab5_referee *R) {
    lab5_scenario *sc = &R->sc;
    size_t V = (size_t)R->model.cfg.n_vocab;
    char err[512] = "";
    if (llm_load_gguf_f32(R->model.path, &R->wcfg, &R->w, err, sizeof err))
        pl_usage_error("the single-device reference cannot read the model: %s", err);
    sc->ref_prompt = malloc((size_t)sc->P * V * sizeof(float));
    sc->ref_gen = malloc(((size_t)sc->K + 1) * V * sizeof(float));
    sc->ref_batch = malloc((size_t)sc->B * V * sizeof(float));
    sc->ref_decode = malloc(((size_t)sc->D * sc->B + 1) * V * sizeof(float));
    PL_CHECK(sc->ref_prompt && sc->ref_gen && sc->ref_batch && sc->ref_decode, "out of host memory");
    llm_kv_cache kv;
    llm_workspace ws;
    llm_kv_cache_init(&kv, &R->wcfg, NULL, sc->B, sc->n_ctx, 0, R->wcfg.n_layer);
    llm_workspace_init(&ws, &R->wcfg, NULL, sc->n_tok_max);
    float *dev = pl_malloc_floats((size_t)sc->n_tok_max * V);
    int *seq = calloc((size_t)sc->n_tok_max, sizeof(int)), *pos = calloc((size_t)sc->n_tok_max, sizeof(int));
    PL_CHECK(seq && pos, "out of host memory");
    for (int i = 0; i < sc->P; i++) pos[i] = i;
    ref_step(R, &kv, &ws, dev, sc->prompt, seq, pos, sc->P, LLM_LOGITS_ALL, sc->ref_prompt);
    sc->gen[0] = lab5_argmax(sc->ref_prompt + (size_t)(sc->P - 1) * V, (int)V);
    for (int k = 0; k < sc->K; k++) {
        int p = sc->P + k;
        ref_step(R, &kv, &ws, dev, &sc->gen[k], seq, &p, 1, LLM_LOGITS_LAST, sc->ref_gen + (size_t)k * V);
        sc->gen[k + 1] = lab5_argmax(sc->ref_gen + (size_t)k * V, (int)V);
    }
    ref_step(R, &kv, &ws, dev, sc->btok, sc->bseq, sc->bpos, sc->bn, LLM_LOGITS_LAST, sc->ref_batch);
    for (int d = 0; d < sc->D; d++) {
        for (int s = 0; s < sc->B; s++) seq[s] = s, pos[s] = sc->blen[s] + d;
        ref_step(R, &kv, &ws, dev, sc->dtok + (size_t)d * sc->B, seq, pos, sc->B, LLM_LOGITS_LAST,
                 sc->ref_decode + (size_t)d * sc->B * V);
    }
    free(seq), free(pos);
    pl_free(dev);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&kv);
}

/* Does rank r hold the logits of some session (so that its referee needs the reference)? */
static bool holds_logits(const lab5_referee *R, int r) {
    if (r == 0) return true; /* row and tensor split */
    float p[LAB5_MAX_RANKS], cuts[LAB5_MAX_RANKS + 1];
    int np;
    const char *splits[2] = {"", lab5_uneven_split(R->n)};
    for (int i = 0; i < 2; i++) {
        PL_CHECK(lab5_parse_split(splits[i], p, &np), "a malformed split");
        lab5_cuts(p, np, R->n, cuts);
        if (lab5_output_rank(LAB5_LAYER, cuts, R->n, R->model.cfg.n_layer) == r) return true;
    }
    return false;
}

/* ================================================================================== */
/* The scenario                                                                       */
/* ================================================================================== */

static void scenario_init(lab5_referee *R) {
    const lab5_flags *f = lab5_opts();
    lab5_scenario *sc = &R->sc;
    sc->prompt = lab5_tokens(&R->model, f->prompt, false, &sc->P);
    if (sc->P < 1 || sc->P > 512) pl_usage_error("--prompt: %d tokens; the graded scenario takes 1 .. 512", sc->P);
    sc->K = f->gen, sc->B = f->batch, sc->D = f->decode;
    int N, M, longest = 0;
    int *text = lab5_tokens(&R->model, LAB5_BATCH_TEXT, false, &N);
    int *more = lab5_tokens(&R->model, LAB5_SWEEP_TEXT, false, &M);
    sc->blen = malloc((size_t)sc->B * sizeof(int));
    sc->gen = calloc((size_t)sc->K + 1, sizeof(int));
    PL_CHECK(sc->blen && sc->gen, "out of host memory");
    sc->bn = 0;
    for (int s = 0; s < sc->B; s++) { /* lengths 2, 5, 3, 6, 4, 2, ...: sequences at different positions */
        sc->blen[s] = 2 + 3 * s % 5;
        sc->bn += sc->blen[s];
        longest = sc->blen[s] > longest ? sc->blen[s] : longest;
    }
    sc->btok = malloc((size_t)sc->bn * sizeof(int)), sc->bseq = malloc((size_t)sc->bn * sizeof(int));
    sc->bpos = malloc((size_t)sc->bn * sizeof(int)), sc->dtok = malloc((size_t)sc->D * sc->B * sizeof(int) + 1);
    sc->pool = malloc(((size_t)N + M) * sizeof(int));
    PL_CHECK(sc->btok && sc->bseq && sc->bpos && sc->dtok && sc->pool, "out of host memory");
    for (int s = 0, t = 0; s < sc->B; s++)
        for (int i = 0; i < sc->blen[s]; i++, t++) sc->btok[t] = text[(s + i) % N], sc->bseq[t] = s, sc->bpos[t] = i;
    for (int d = 0; d < sc->D; d++)
        for (int s = 0; s < sc->B; s++) sc->dtok[d * sc->B + s] = text[(7 * s + 3 * d + 1) % N];
    memcpy(sc->pool, text, (size_t)N * sizeof(int));
    memcpy(sc->pool + N, more, (size_t)M * sizeof(int));
    sc->npool = N + M;
    free(text), free(more);
    /* room for the longest sequence, and for the invalid batch's hole to be a hole */
    sc->n_ctx = (sc->P + sc->K > longest + sc->D ? sc->P + sc->K : longest + sc->D) + 8;
    if (sc->n_ctx * 2 > R->model.cfg.n_ctx)
        pl_usage_error("the scenario needs %d positions, the model has %d", 2 * sc->n_ctx, R->model.cfg.n_ctx);
    sc->n_tok_max = sc->P > sc->bn ? sc->P : sc->bn;
    R->have_ref = holds_logits(R, R->me);
    if (R->have_ref) reference(R);
}

static void scenario_free(lab5_scenario *sc) {
    void *p[] = {sc->prompt, sc->gen, sc->btok, sc->bseq, sc->bpos, sc->blen, sc->dtok, sc->pool,
                 sc->ref_prompt, sc->ref_gen, sc->ref_batch, sc->ref_decode};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    memset(sc, 0, sizeof *sc);
}

/* ================================================================================== */
/* The lab                                                                            */
/* ================================================================================== */

/* Before the player exists: the flags, the model (a tiny llama written here), the scenario
 * and its reference; the player gets the file's path (it maps the same file). */
void lab5_init(void) {
    lab5_referee *R = &g_ref5;
    const lab5_flags *f = lab5_opts();
    R->n = pl_world();
    R->me = pl_rank();
    if (R->n > LAB5_MAX_RANKS) pl_usage_error("%d ranks: the split takes at most %d", R->n, LAB5_MAX_RANKS);
    float p[LAB5_MAX_RANKS];
    int np;
    bool ok = lab5_parse_split(f->split, p, &np) && np <= R->n;
    for (int r = 0; r < np; r++) ok &= p[r] >= 0 && p[r] < 1e30f;
    if (!ok)
        pl_usage_error("--tensor-split '%s': at most %d proportions, finite and >= 0, comma-separated", f->split, R->n);
    if (f->list_only) return; /* the plan needs no model */
    lab5_model_open(&R->model, pl_info()->seed);
    drv_player_arg("--gguf");
    drv_player_arg(R->model.path);
    scenario_init(R);
    R->ready = true;
    R->tol = drv_tolerance();
    bool chosen = strcmp(f->prompt, LAB5_DEFAULT_PROMPT) != 0;
    R->tol_prompt = chosen ? lab5_prompt_tolerance(&R->model.cfg, R->sc.P + R->sc.K + 1, R->tol) : R->tol;
    drv_print("# lab05: %d rank(s), %s\n", R->n, R->model.desc);
    drv_print("# scenario: prompt \"%s\", %d greedy tokens, a batch of %d sequences and %d decode steps, %d "
              "micro-batches at most; tolerance %.0e (%s)\n", f->prompt, f->gen + 1, f->batch, f->decode, f->micro,
              R->tol, drv_tolerance_why());
    if (chosen)
        drv_print("# the prompt is not the graded one: its logits within %.2g, float32 rounding over the model's "
                  "longest sums (lab5_prompt_tolerance)\n", R->tol_prompt);
}

void lab5_finish(void) {
    lab5_referee *R = &g_ref5;
    if (R->have_ref) llm_weights_free(&R->w, &R->wcfg);
    scenario_free(&R->sc);
    lab5_model_close(&R->model);
    memset(R->sess, 0, sizeof R->sess);
}
