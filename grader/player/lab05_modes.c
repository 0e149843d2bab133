/* lab05_modes.c (player) - Lab 5's modes, the student's split run alone (or the solution's
 * with SOLUTION=1), no referee:
 *   --run chat    make lab-5 RUN=chat PROMPT="...": the prompt in the model's chat template,
 *                 --tokens greedy tokens in each split mode: the text, tokens/s, and the
 *                 prompt's last logits against the single-device forward on float32-
 *                 dequantised weights, within the bound derived for the prompt's length
 *                 (lab5_prompt_tolerance);
 *   --run sweep   make lab-5 RUN=sweep: tokens/s of a prefill (batch sequences of
 *                 --prompt-len tokens) and of a decode step, at batch 1, 4, 16 and 64, per
 *                 mode, measured here and predicted for dgx-h100 and pcie-4gpu by replaying
 *                 the step's recorded operations (docs/cost-model.md); a plot
 *                 (scripts/plot-lab5-sweep.sh);
 *   --run bench   at one rank first the single-device forward on float32-dequantised and on
 *                 quantised weights (prefill of LAB5_SWEEP_TEXT: the fastest of 5; then 32
 *                 greedy tokens: the median time of one), with the prompt's token ids for
 *                 scripts/bench-lab5.sh, which times llama.cpp on the same file and tokens
 *                 and prints the ratios; then the sweep's table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h> // defines: clock_gettime (the bench's CPU time)

#include "lab05_player.h"
#include "pl_costmodel.h" // defines: plc_profile, plc_replay_trace

static const llm_config *cfg(void) { return &lab5_kit_state()->model.cfg; }

/* ls_init on every rank; NULL (and a line saying why) when it failed anywhere. */
static ls_state *init_or_say(const ls_params *p, const char *mode) {
    ls_state *st = NULL;
    char err[300] = "";
    int rc = ls_init(&st, cfg(), p, err, sizeof err);
    int who = lab5_first_failing(rc != LS_OK, err, sizeof err);
    if (who >= pl_world()) return st;
    drv_say("%-6s ls_init failed on rank %d: %s\n", mode, who, err);
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
    int who = lab5_first_failing(rows < 0, err, sizeof err);
    if (who >= pl_world()) return true;
    drv_say("ls_forward failed on rank %d: %s\n", who, err);
    return false;
}

/* Logits row `row` of the output rank, on every rank (host, V floats). */
static void share_row(const float *logits, int row, int out_rank, float *h) {
    size_t V = (size_t)cfg()->n_vocab;
    if (pl_rank() == out_rank) pl_download(h, logits + (size_t)row * V, V * sizeof(float));
    pl_host_bcast(h, V * sizeof(float), out_rank, NULL);
}

/* The greedy token of logits row `row`, on the output rank, shared with every rank. */
static int next_token(const float *logits, int row, int out_rank) {
    int tok = 0;
    if (pl_rank() == out_rank) {
        size_t V = (size_t)cfg()->n_vocab;
        float *h = malloc(V * sizeof(float));
        PL_CHECK(h != NULL, "out of host memory");
        pl_download(h, logits + (size_t)row * V, V * sizeof(float));
        tok = lab5_argmax(h, (int)V);
        free(h);
    }
    pl_host_bcast(&tok, sizeof tok, out_rank, NULL);
    return tok;
}

static void split_cuts(float *p, int *np, float *cuts) {
    lab5_parse_split(lab5_opts()->split, p, np);
    lab5_cuts(p, *np, pl_world(), cuts);
}

/* ---- chat -------------------------------------------------------------------------------- */

/* The single-device forward's last logits row of the prompt, on float32-dequantised weights
 * (rank 0 computes, every rank receives); false when the model cannot be read. */
static bool chat_reference(const int *prompt, int P, float *ref) {
    char err[512] = "";
    double ok = 1;
    if (pl_rank() == 0) {
        llm_config c;
        llm_weights w;
        ok = llm_load_gguf_f32(lab5_kit_state()->model.path, &c, &w, err, sizeof err) == 0;
        if (ok) {
            llm_kv_cache kv;
            llm_workspace ws;
            llm_kv_cache_init(&kv, &c, NULL, 1, P, 0, c.n_layer);
            llm_workspace_init(&ws, &c, NULL, P);
            float *dev = pl_malloc_floats((size_t)c.n_vocab);
            int *seq = calloc((size_t)P, sizeof(int)), *pos = malloc((size_t)P * sizeof(int));
            PL_CHECK(seq && pos, "out of host memory");
            for (int i = 0; i < P; i++) pos[i] = i;
            ok = llm_forward(&c, &w, &kv, &ws, prompt, seq, pos, P, dev, LLM_LOGITS_LAST, NULL) == 1;
            if (ok) pl_download(ref, dev, (size_t)c.n_vocab * sizeof(float));
            free(seq), free(pos);
            pl_free(dev);
            llm_workspace_free(&ws);
            llm_kv_cache_free(&kv);
            llm_weights_free(&w, &c);
        }
    }
    pl_host_allreduce(&ok, 1, PL_HOST_MIN, NULL);
    if (!ok) {
        pl_host_bcast(err, sizeof err, 0, NULL);
        drv_say("# the single-device forward could not run (%s): the modes are not compared with it\n", err);
        return false;
    }
    pl_host_bcast(ref, (size_t)cfg()->n_vocab * sizeof(float), 0, NULL);
    return true;
}

static double rel_error(const float *got, const float *want, size_t n) {
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = (double)got[i] - (double)want[i];
        d2 += d * d, r2 += (double)want[i] * want[i];
    }
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

int lab5_mode_chat(void) {
    const lab5_flags *f = lab5_opts();
    lab5_model *model = &lab5_kit_state()->model;
    int P, n_gen = f->tokens, eos = ds_bpe_eos(model->bpe), im_end = ds_bpe_token_id(model->bpe, "<|im_end|>");
    int *prompt = lab5_tokens(model, f->prompt, true, &P);
    if (P + n_gen + 1 > cfg()->n_ctx)
        pl_usage_error("%d prompt tokens + %d more: the model's context is %d", P, n_gen, cfg()->n_ctx);
    float p[LAB5_MAX_RANKS], cuts[LAB5_MAX_RANKS + 1];
    int np, n = pl_world();
    split_cuts(p, &np, cuts);
    size_t V = (size_t)cfg()->n_vocab;
    float *ref = malloc(V * sizeof(float)), *row = malloc(V * sizeof(float));
    PL_CHECK(ref && row, "out of host memory");
    bool have_ref = chat_reference(prompt, P, ref);
    lab5_model_forget(model); /* a tiny llama's file: read for the last time */
    double tol = lab5_prompt_tolerance(cfg(), P, pl_tolerance());
    drv_say("# chat on %d rank(s), %s%s; prompt (%d tokens in the chat template): %s\n", n,
            f->split[0] ? "--tensor-split " : "equal split", f->split, P, f->prompt);
    int *seq = calloc((size_t)P + 1, sizeof(int)), *pos = malloc(((size_t)P + 1) * sizeof(int));
    int *out = malloc(((size_t)n_gen + 1) * sizeof(int)), *first = calloc((size_t)n_gen + 1, sizeof(int));
    char *text = malloc(16 * (size_t)n_gen + 64);
    PL_CHECK(seq && pos && out && first && text, "out of host memory");
    float *logits = pl_malloc_floats((size_t)P * V);
    int n_first = -1, same = 1, above = 0;
    for (int m = LAB5_LAYER; m <= LAB5_TENSOR; m++) {
        ls_params prm = {(ls_mode)m, np ? p : NULL, np, 1, P + n_gen + 1, P, f->micro, pl_comm_world()};
        ls_state *st = init_or_say(&prm, LAB5_MODE_NAME[m]);
        if (!st) continue;
        int out_rank = lab5_output_rank(m, cuts, n, cfg()->n_layer), k = 0;
        double t_prefill = 0, t_decode = 0, t, err = -1;
        for (int i = 0; i < P; i++) pos[i] = i;
        bool ok = forward(st, prompt, seq, pos, P, logits, &t_prefill);
        if (ok && have_ref) {
            share_row(logits, 0, out_rank, row);
            err = rel_error(row, ref, V);
            above += !(err <= tol);
        }
        if (ok) out[k++] = next_token(logits, 0, out_rank);
        while (ok && k < n_gen && out[k - 1] != eos && out[k - 1] != im_end) {
            int p1 = P + k - 1;
            ok = forward(st, &out[k - 1], seq, &p1, 1, logits, &t);
            t_decode += t;
            if (ok) out[k++] = next_token(logits, 0, out_rank);
        }
        ls_free(st);
        if (!ok) continue;
        if (n_first < 0) n_first = k, memcpy(first, out, (size_t)k * sizeof(int));
        else same &= k == n_first && !memcmp(first, out, (size_t)k * sizeof(int));
        int shown = k - (out[k - 1] == eos || out[k - 1] == im_end); /* the end marker is not text */
        lab5_text(model, out, shown, text, 16 * (size_t)n_gen + 64);
        char cmp[160] = "";
        if (err >= 0)
            snprintf(cmp, sizeof cmp, "; the prompt's last logits vs the single-device forward: %.2g (%s %.2g)", err,
                     err <= tol ? "within" : "ABOVE", tol);
        drv_say("== %s split: prefill %d tokens at %.1f tok/s, decode %d at %.1f tok/s%s\n%s\n", LAB5_MODE_NAME[m], P,
                P / t_prefill, k - 1, k > 1 ? (k - 1) / t_decode : 0.0, cmp, text);
    }
    if (n_first >= 0) drv_say("# %s\n", same ? "every mode generated the same tokens" : "the modes generated different tokens");
    if (have_ref)
        drv_say("# bound %.2g for a prompt of %d tokens: float32 rounding over the model's longest sums (%s)%s\n", tol, P,
                "docs/llama-split.md", above ? "; a mode ABOVE it computes something else than the model" : "");
    pl_free(logits);
    free(prompt), free(seq), free(pos), free(out), free(first), free(text), free(ref), free(row);
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
    if (plc_replay_trace(prof, 0, pl_comm_world(), &pp, err, sizeof err) != 0 || !(pp.step_time > 0)) return 0;
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
            if (v[k] > top[k]) top[k] = v[k], best[k] = LAB5_MODE_NAME[m];
    }
    drv_say("winner np %d %-7s batch %2d  measured %-6s dgx-h100 %-6s pcie-4gpu %-6s\n", pl_world(), phase, batch,
            best[0], best[1], best[2]);
}

int lab5_mode_sweep(void) {
    static const int batches[] = {1, 4, 16, 64};
    const lab5_flags *f = lab5_opts();
    lab5_model *model = &lab5_kit_state()->model;
    const int nb = 4, P = f->prompt_len, bmax = 64, n = pl_world();
    lab5_model_forget(model); /* the weights come through ls_load, from the mapping */
    plc_profile prof[2];
    char err[256];
    bool have[2] = {plc_profile_load(&prof[0], "dgx-h100", err, sizeof err) == 0,
                    plc_profile_load(&prof[1], "pcie-4gpu", err, sizeof err) == 0};
    for (int k = 0; k < 2; k++) have[k] = have[k] && n <= prof[k].gpus_per_node * prof[k].nodes;
    float p[LAB5_MAX_RANKS], cuts[LAB5_MAX_RANKS + 1];
    int np, N;
    split_cuts(p, &np, cuts);
    int *text = lab5_tokens(model, LAB5_SWEEP_TEXT, false, &N);
    int *tok = malloc((size_t)bmax * P * sizeof(int)), *seq = malloc((size_t)bmax * P * sizeof(int));
    int *pos = malloc((size_t)bmax * P * sizeof(int));
    PL_CHECK(tok && seq && pos, "out of host memory");
    float *logits = pl_malloc_floats((size_t)bmax * cfg()->n_vocab);
    rate pre[4][3], dec[4][3];
    memset(pre, 0, sizeof pre), memset(dec, 0, sizeof dec);
    drv_say("# sweep on %d rank(s), %s, %s, prompts of %d tokens; tokens/s measured here (device %s) and predicted by "
            "the cost model%s%s\n", n, model->desc, f->split[0] ? f->split : "equal split", P,
            pl_device_name(pl_info()->device), have[0] ? "" : " (dgx-h100: -)", have[1] ? "" : " (pcie-4gpu: - beyond 4 ranks)");
    for (int m = LAB5_LAYER; m <= LAB5_TENSOR; m++)
        for (int i = 0; i < nb; i++) {
            int b = batches[i];
            ls_params prm = {(ls_mode)m, np ? p : NULL, np, b, P + 2, b * P, f->micro, pl_comm_world()};
            ls_state *st = init_or_say(&prm, LAB5_MODE_NAME[m]);
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
            drv_say("sweep np %d mode %-6s batch %2d prefill %9.1f %11.1f %11.1f decode %8.1f %11.1f %11.1f\n", n,
                    LAB5_MODE_NAME[m], b, pre[i][m].measured, pre[i][m].dgx, pre[i][m].pcie, dec[i][m].measured,
                    dec[i][m].dgx, dec[i][m].pcie);
        }
    drv_say("#        columns: tokens/s measured, dgx-h100, pcie-4gpu (0: not predicted)\n");
    for (int i = 0; i < nb && n > 1; i++) winners("prefill", batches[i], pre[i]); /* one rank: the same work */
    for (int i = 0; i < nb && n > 1; i++) winners("decode", batches[i], dec[i]);
    pl_free(logits);
    free(text), free(tok), free(seq), free(pos);
    return 0;
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
    if ((f32 ? llm_load_gguf_f32 : llm_load_gguf)(lab5_kit_state()->model.path, &c, &w, err, sizeof err)) {
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

int lab5_mode_bench(void) {
    lab5_model *model = &lab5_kit_state()->model;
    if (pl_world() == 1) {
        int P;
        int *prompt = lab5_tokens(model, LAB5_SWEEP_TEXT, false, &P);
        char ids[2048];
        int len = snprintf(ids, sizeof ids, "bench05 prompt_ids");
        for (int i = 0; i < P && len < (int)sizeof ids - 12; i++) len += snprintf(ids + len, sizeof ids - (size_t)len, " %d", prompt[i]);
        drv_say("# the single-device forward on this device, one thread: float32-dequantised vs quantised weights "
                "(%s)\n%s\nbench05 model %s\nbench05 gen %d\n", model->desc, ids, model->tmp ? "-" : model->path,
                BENCH_GEN); /* "-": the tiny llama's file is about to go */
        bench_weights(true, prompt, P);
        bench_weights(false, prompt, P);
        free(prompt);
    }
    return lab5_mode_sweep(); /* removes a tiny llama's file */
}
