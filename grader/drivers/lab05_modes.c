/* lab05_modes.c - Lab 5's modes, on the student's split (or the solution's with SOLUTION=1):
 *   --run chat    make lab-5 RUN=chat PROMPT="...": the prompt in the model's chat template,
 *                 --tokens greedy tokens in each split mode, the text and tokens/s per mode;
 *   --run sweep   make lab-5 RUN=sweep: tokens/s of a prefill (batch sequences of
 *                 --prompt-len tokens) and of a decode step, at batch 1, 4, 16 and 64, per
 *                 mode, measured here and predicted for dgx-h100 and pcie-4gpu by replaying
 *                 the step's recorded operations (docs/cost-model.md); a plot
 *                 (scripts/plot-lab5-sweep.sh);
 *   --run bench   at one rank first the single-device forward on float32-dequantised and on
 *                 quantised weights (prefill of SWEEP_TEXT: the fastest of 5; then 32 greedy
 *                 tokens: the median time of one), with the
 *                 prompt's token ids for scripts/bench-lab5.sh, which times llama.cpp on the
 *                 same file and tokens and prints the ratios; then the sweep's table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h> // defines: clock_gettime (the bench's CPU time)

#include "lab05.h"

#define SWEEP_TEXT "It was a bright cold day in April, and the clocks were striking thirteen over the quiet town."

/* ls_init on every rank; NULL (and a line saying why) when it failed anywhere. */
static ls_state *init_or_say(const ls_params *p, const char *mode) {
    ls_state *st = NULL;
    char err[300] = "";
    int rc = ls_init(&st, &g_cfg, p, err, sizeof err);
    double who = drv_min(rc != LS_OK ? g_me : 1e9);
    if (who > 1e8) return st;
    pl_host_bcast(err, sizeof err, (int)who, NULL);
    drv_say("%-6s ls_init failed on rank %.0f: %s\n", mode, who, err);
    if (rc == LS_OK) ls_free(st);
    return NULL;
}

/* One collective forward, timed (slowest rank); false on every rank when any rank failed. */
static bool forward(ls_state *st, const int *tok, const int *seq, const int *pos, int n, float *logits, double *secs) {
    char err[300] = "";
    pl_device_sync();
    double t0 = pl_now();
    int rows = ls_forward(st, tok, seq, pos, n, LLM_LOGITS_LAST, logits, err, sizeof err);
    pl_device_sync();
    *secs = drv_max(pl_now() - t0);
    double who = drv_min(rows < 0 ? g_me : 1e9);
    if (who > 1e8) return true;
    pl_host_bcast(err, sizeof err, (int)who, NULL);
    drv_say("ls_forward failed on rank %.0f: %s\n", who, err);
    return false;
}

/* The greedy token of logits row `row`, on the output rank, shared with every rank. */
static int next_token(const float *logits, int row, int out_rank) {
    int tok = 0;
    if (g_me == out_rank) {
        size_t V = (size_t)g_cfg.n_vocab;
        float *h = malloc(V * sizeof(float));
        PL_CHECK(h != NULL, "out of host memory");
        pl_download(h, logits + (size_t)row * V, V * sizeof(float));
        tok = argmax_row(h, (int)V);
        free(h);
    }
    pl_host_bcast(&tok, sizeof tok, out_rank, NULL);
    return tok;
}

static void split_cuts(float *p, int *np, float *cuts) {
    rl_parse(g_split, p, np);
    rl_cuts(p, *np, g_n, cuts);
}

int mode_chat(void) {
    int P, n_gen = g_tokens, eos = ds_bpe_eos(g_bpe), im_end = ds_bpe_token_id(g_bpe, "<|im_end|>");
    int *prompt = kit_tokens(g_prompt, true, &P);
    if (P + n_gen + 1 > g_cfg.n_ctx)
        pl_usage_error("%d prompt tokens + %d more: the model's context is %d", P, n_gen, g_cfg.n_ctx);
    float p[LS_MAX_RANKS], cuts[LS_MAX_RANKS + 1];
    int np;
    split_cuts(p, &np, cuts);
    drv_say("# chat on %d rank(s), %s%s; prompt (%d tokens in the chat template): %s\n", g_n,
            g_split[0] ? "--tensor-split " : "equal split", g_split, P, g_prompt);
    int *seq = calloc((size_t)P + 1, sizeof(int)), *pos = malloc(((size_t)P + 1) * sizeof(int));
    int *out = malloc(((size_t)n_gen + 1) * sizeof(int)), *first = calloc((size_t)n_gen + 1, sizeof(int));
    char *text = malloc(16 * (size_t)n_gen + 64);
    PL_CHECK(seq && pos && out && first && text, "out of host memory");
    float *logits = pl_malloc_floats((size_t)P * g_cfg.n_vocab);
    int n_first = -1, same = 1;
    for (int m = LS_LAYER; m <= LS_TENSOR; m++) {
        ls_params prm = {(ls_mode)m, np ? p : NULL, np, 1, P + n_gen + 1, P, g_micro, g_comm};
        ls_state *st = init_or_say(&prm, MODE_NAME[m]);
        if (!st) continue;
        int out_rank = rl_output_rank((ls_mode)m, cuts), n = 0;
        double t_prefill = 0, t_decode = 0, t;
        for (int i = 0; i < P; i++) pos[i] = i;
        bool ok = forward(st, prompt, seq, pos, P, logits, &t_prefill);
        if (ok) out[n++] = next_token(logits, 0, out_rank);
        while (ok && n < n_gen && out[n - 1] != eos && out[n - 1] != im_end) {
            int p1 = P + n - 1;
            ok = forward(st, &out[n - 1], seq, &p1, 1, logits, &t);
            t_decode += t;
            if (ok) out[n++] = next_token(logits, 0, out_rank);
        }
        ls_free(st);
        if (!ok) continue;
        if (n_first < 0) n_first = n, memcpy(first, out, (size_t)n * sizeof(int));
        else same &= n == n_first && !memcmp(first, out, (size_t)n * sizeof(int));
        int shown = n - (out[n - 1] == eos || out[n - 1] == im_end); /* the end marker is not text */
        kit_text(out, shown, text, 16 * (size_t)n_gen + 64);
        drv_say("== %s split: prefill %d tokens at %.1f tok/s, decode %d at %.1f tok/s\n%s\n", MODE_NAME[m], P,
                P / t_prefill, n - 1, n > 1 ? (n - 1) / t_decode : 0.0, text);
    }
    if (n_first >= 0) drv_say("# %s\n", same ? "every mode generated the same tokens" : "the modes generated different tokens");
    pl_free(logits);
    free(prompt), free(seq), free(pos), free(out), free(first), free(text);
    return 0;
}

/* ---- sweep ------------------------------------------------------------------------------------- */

typedef struct {
    double measured, dgx, pcie; /* tokens/s; predictions 0 when the profile cannot model it */
} rate;

/* Tokens/s of one recorded step on a profile: the trace since the last clear, replayed. */
static double predicted(const plc_profile *prof, bool have, double tokens) {
    if (!have) return 0;
    plc_prediction pp;
    char err[256];
    if (plc_replay_trace(prof, 0, g_comm, &pp, err, sizeof err) != 0 || !(pp.step_time > 0)) return 0;
    return tokens / pp.step_time;
}

static bool timed_step(ls_state *st, const int *tok, const int *seq, const int *pos, int n, float *logits,
                       const plc_profile *prof, const bool *have, rate *r) {
    double t;
    pl_trace_clear();
    if (!forward(st, tok, seq, pos, n, logits, &t)) return false;
    double tokens = n;
    r->measured = tokens / t;
    r->dgx = predicted(&prof[0], have[0], tokens);
    r->pcie = predicted(&prof[1], have[1], tokens);
    return true;
}

static void winners(const char *phase, int batch, const rate *by_mode) {
    const char *best[3] = {"-", "-", "-"};
    double top[3] = {0, 0, 0};
    for (int m = 0; m < 3; m++) {
        double v[3] = {by_mode[m].measured, by_mode[m].dgx, by_mode[m].pcie};
        for (int k = 0; k < 3; k++)
            if (v[k] > top[k]) top[k] = v[k], best[k] = MODE_NAME[m];
    }
    drv_say("winner np %d %-7s batch %2d  measured %-6s dgx-h100 %-6s pcie-4gpu %-6s\n", g_n, phase, batch, best[0], best[1],
            best[2]);
}

/* ---- bench: float32 vs quantised weights, one device -------------------------------------- */

#define BENCH_GEN 32
#define BENCH_PREFILLS 5

/* Seconds of CPU this process has used: on a machine shared with other jobs, the work a
 * step took, where the wall clock also counts the time others had the core. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prefill of the prompt (the fastest of BENCH_PREFILLS, the cache rewound between), then
 * BENCH_GEN greedy tokens one at a time (their median time: robust to a busy machine), on
 * weights loaded float32 or as stored; the bytes of weights a decode step reads. */
static void bench_weights(bool f32, const int *prompt, int P) {
    llm_config c;
    llm_weights w;
    char err[512];
    if ((f32 ? llm_load_gguf_f32 : llm_load_gguf)(kit_path(), &c, &w, err, sizeof err)) {
        drv_say("# bench: %s\n", err);
        return;
    }
    llm_kv_cache kv;
    llm_workspace ws;
    llm_kv_cache_init(&kv, &c, NULL, 1, P + BENCH_GEN + 1, 0, c.n_layer);
    llm_workspace_init(&ws, &c, NULL, P);
    float *logits = pl_malloc_floats((size_t)c.n_vocab);
    int *seq = calloc((size_t)P + BENCH_GEN + 1, sizeof(int)), *pos = malloc(((size_t)P + BENCH_GEN + 1) * sizeof(int));
    PL_CHECK(seq && pos, "out of host memory");
    for (int i = 0; i < P + BENCH_GEN + 1; i++) pos[i] = i;
    double best_pre = 1e30, cpu_pre = 1e30, t_tok[BENCH_GEN], c_tok[BENCH_GEN];
    for (int rep = 0; rep < BENCH_PREFILLS; rep++) {
        pl_device_sync();
        double t0 = pl_now(), c0 = cpu_now();
        llm_forward(&c, &w, &kv, &ws, prompt, seq, pos, P, logits, LLM_LOGITS_LAST, NULL);
        pl_device_sync();
        double t = pl_now() - t0, ct = cpu_now() - c0;
        best_pre = t < best_pre ? t : best_pre;
        cpu_pre = ct < cpu_pre ? ct : cpu_pre;
    }
    for (int k = 0; k < BENCH_GEN; k++) {
        int tok = next_token(logits, 0, 0);
        double t0 = pl_now(), c0 = cpu_now();
        llm_forward(&c, &w, &kv, &ws, &tok, seq, &pos[P + k], 1, logits, LLM_LOGITS_LAST, NULL);
        pl_device_sync();
        t_tok[k] = pl_now() - t0, c_tok[k] = cpu_now() - c0;
    }
    qsort(t_tok, BENCH_GEN, sizeof t_tok[0], cmp_double);
    qsort(c_tok, BENCH_GEN, sizeof c_tok[0], cmp_double);
    double t_dec = 0.5 * (t_tok[(BENCH_GEN - 1) / 2] + t_tok[BENCH_GEN / 2]);
    double c_dec = 0.5 * (c_tok[(BENCH_GEN - 1) / 2] + c_tok[BENCH_GEN / 2]);
    size_t bytes = llm_weights_bytes(&w, &c);
    int64_t V, C;
    llm_tensor_shape(&c, LLM_TOKEN_EMBD, &V, &C);
    double per_token = (double)bytes - (c.tied_output ? 0 : (double)llm_mat_bytes(w.token_embd.type, V, C));
    drv_say("bench05 weights %-5s prefill %d tokens %8.1f tok/s  decode %d tokens %7.1f tok/s  cpu-time: prefill %.1f "
            "decode %.1f tok/s  weights %.1f MB, %.1f MB read per decoded token\n", f32 ? "f32" : "quant", P,
            P / best_pre, BENCH_GEN, 1 / t_dec, P / cpu_pre, 1 / c_dec, bytes / 1e6, per_token / 1e6);
    pl_free(logits);
    free(seq), free(pos);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&kv);
    llm_weights_free(&w, &c);
}

int mode_bench(void) {
    if (g_n == 1) {
        int P;
        int *prompt = kit_tokens(SWEEP_TEXT, false, &P);
        char ids[2048];
        int len = snprintf(ids, sizeof ids, "bench05 prompt_ids");
        for (int i = 0; i < P && len < (int)sizeof ids - 12; i++) len += snprintf(ids + len, sizeof ids - (size_t)len, " %d", prompt[i]);
        drv_say("# the single-device forward on this device, one thread: float32-dequantised vs quantised weights "
                "(%s)\n%s\nbench05 model %s\nbench05 gen %d\n", g_model_desc, ids,
                kit_temporary() ? "-" : kit_path(), BENCH_GEN); /* "-": the tiny llama's file is about to go */
        bench_weights(true, prompt, P);
        bench_weights(false, prompt, P);
        free(prompt);
    }
    kit_forget_path();
    return mode_sweep();
}

int mode_sweep(void) {
    static const int batches[] = {1, 4, 16, 64};
    const int nb = 4, P = g_prompt_len, bmax = 64;
    plc_profile prof[2];
    char err[256];
    bool have[2] = {plc_profile_load(&prof[0], "dgx-h100", err, sizeof err) == 0,
                    plc_profile_load(&prof[1], "pcie-4gpu", err, sizeof err) == 0};
    for (int k = 0; k < 2; k++) have[k] = have[k] && g_n <= prof[k].gpus_per_node * prof[k].nodes;
    float p[LS_MAX_RANKS], cuts[LS_MAX_RANKS + 1];
    int np, N;
    split_cuts(p, &np, cuts);
    int *text = kit_tokens(SWEEP_TEXT, false, &N);
    int *tok = malloc((size_t)bmax * P * sizeof(int)), *seq = malloc((size_t)bmax * P * sizeof(int));
    int *pos = malloc((size_t)bmax * P * sizeof(int));
    PL_CHECK(tok && seq && pos, "out of host memory");
    float *logits = pl_malloc_floats((size_t)bmax * g_cfg.n_vocab);
    rate pre[4][3], dec[4][3];
    memset(pre, 0, sizeof pre), memset(dec, 0, sizeof dec);
    drv_say("# sweep on %d rank(s), %s, %s, prompts of %d tokens; tokens/s measured here (device %s) and predicted by "
            "the cost model%s%s\n", g_n, g_model_desc, g_split[0] ? g_split : "equal split", P,
            pl_device_name(pl_info()->device), have[0] ? "" : " (dgx-h100: -)", have[1] ? "" : " (pcie-4gpu: - beyond 4 ranks)");
    for (int m = LS_LAYER; m <= LS_TENSOR; m++)
        for (int i = 0; i < nb; i++) {
            int b = batches[i];
            ls_params prm = {(ls_mode)m, np ? p : NULL, np, b, P + 2, b * P, g_micro, g_comm};
            ls_state *st = init_or_say(&prm, MODE_NAME[m]);
            if (!st) continue;
            for (int s = 0; s < b; s++)
                for (int j = 0; j < P; j++) tok[s * P + j] = text[(s + j) % N], seq[s * P + j] = s, pos[s * P + j] = j;
            bool ok = timed_step(st, tok, seq, pos, b * P, logits, prof, have, &pre[i][m]);
            for (int s = 0; s < b; s++) tok[s] = text[(3 * s + 1) % N], seq[s] = s, pos[s] = P;
            double t; /* the first decode step warms up what the prefill did not touch; the second is timed */
            ok = ok && forward(st, tok, seq, pos, b, logits, &t);
            for (int s = 0; s < b; s++) pos[s] = P + 1;
            ok = ok && timed_step(st, tok, seq, pos, b, logits, prof, have, &dec[i][m]);
            ls_free(st);
            if (!ok) continue;
            drv_say("sweep np %d mode %-6s batch %2d prefill %9.1f %11.1f %11.1f decode %8.1f %11.1f %11.1f\n", g_n,
                    MODE_NAME[m], b, pre[i][m].measured, pre[i][m].dgx, pre[i][m].pcie, dec[i][m].measured, dec[i][m].dgx,
                    dec[i][m].pcie);
        }
    drv_say("#        columns: tokens/s measured, dgx-h100, pcie-4gpu (0: not predicted)\n");
    for (int i = 0; i < nb && g_n > 1; i++) winners("prefill", batches[i], pre[i]); /* one rank: the same work */
    for (int i = 0; i < nb && g_n > 1; i++) winners("decode", batches[i], dec[i]);
    pl_free(logits);
    free(text), free(tok), free(seq), free(pos);
    return 0;
}
