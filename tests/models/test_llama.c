/* test_llama.c - models/llama.c against a float64 plain-loop llama forward written here
 * (independent of kernels/), on a tiny random model on the cpu device: the logits, the KV
 * cache (a prompt then one token at a time gives the full-sequence logits), batches that
 * mix sequences, greedy decoding, bad batches, and the pieces the split modes reuse (layer
 * ranges, a row-split linear hook, tensor-parallel shards; at np > 1 a real all-reduce).
 * When a SmolLM2 GGUF is present ($GGUF or datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf)
 * test_llama_gguf.c checks it; this program needs no file.
 *
 *   mpirun -np 1 build/cpu/tests/test_llama      (and -np 2 for tensor parallelism)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record
#include "kern_argmax.h"
#include "llama.h"
#include "pl_instrument.h" // defines: pl_trace_events, pl_trace_count (the harness's record)

#define REF_TOL 1e-5   /* float32 forward vs float64: relative Frobenius error of the logits */
#define SAME_TOL 1e-5  /* two float32 paths (other GEMM shapes or summation orders)          */

static const llm_config CFG = {
    .n_layer = 3, .n_embd = 48, .n_ff = 96, .n_head = 6, .n_head_kv = 2, .head_dim = 8,
    .n_vocab = 100, .n_ctx = 32, .rope_base = 10000.0f, .rms_eps = 1e-5f, .tied_output = false,
};
#define SEED 77

/* ================================================================================== */
/* Helpers                                                                             */
/* ================================================================================== */

static void check_err(const char *what, double e, double tol) {
    char name[512];
    snprintf(name, sizeof name, "%s (rel err %.2e <= %.0e)", what, e, tol);
    tap_check(e <= tol, name);
}

/* ================================================================================== */
/* The float64 reference: plain loops over host copies of the weights                  */
/* ================================================================================== */

typedef struct {
    double *t[LLM_N_LAYER_TENSORS];
} ref_layer;
typedef struct {
    ref_layer *layers;
    double *embd, *out_norm, *out;
} ref_model;

static double *to_double(const float *dev, int64_t n) {
    float *h = download(dev, (size_t)n);
    double *d = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) d[i] = h[i];
    free(h);
    return d;
}

static void ref_load(ref_model *m, const llm_config *c, const llm_weights *w) {
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    for (int l = 0; l < c->n_layer; l++) {
        const llm_layer_weights *lw = &w->layers[l];
        const float *src[LLM_N_LAYER_TENSORS] = {lw->attn_norm, lw->wq.data,     lw->wk.data,   lw->wv.data,
                                                 lw->wo.data,   lw->ffn_norm,    lw->w_gate.data, lw->w_up.data,
                                                 lw->w_down.data};
        for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
            int64_t r, k;
            llm_tensor_shape(c, (llm_tensor)t, &r, &k);
            m->layers[l].t[t] = to_double(src[t], r * k);
        }
    }
    m->embd = to_double(w->token_embd.data, (int64_t)c->n_vocab * c->n_embd);
    m->out_norm = to_double(w->output_norm, c->n_embd);
    m->out = to_double(w->output.data, (int64_t)c->n_vocab * c->n_embd);
}

static void ref_free(ref_model *m, const llm_config *c) {
    for (int l = 0; l < c->n_layer; l++)
        for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) free(m->layers[l].t[t]);
    free(m->layers);
    free(m->embd);
    free(m->out_norm);
    free(m->out);
}

static void ref_rmsnorm(double *out, const double *x, const double *w, int n, int C, double eps) {
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += x[i * C + c] * x[i * C + c];
        double r = 1.0 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) out[i * C + c] = x[i * C + c] * r * w[c];
    }
}

/* y[n, R] = x[n, K] W^T, W [R, K] */
static void ref_linear(double *y, const double *x, const double *W, int n, int R, int K) {
    for (int i = 0; i < n; i++)
        for (int r = 0; r < R; r++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += x[(size_t)i * K + k] * W[(size_t)r * K + k];
            y[(size_t)i * R + r] = acc;
        }
}

/* adjacent pairs (2i, 2i+1), angle pos * theta^(-2i/hd) */
static void ref_rope(double *x, int n, int heads, int hd, double theta) {
    for (int t = 0; t < n; t++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < hd / 2; i++) {
                double a = t * pow(theta, -2.0 * i / hd), c = cos(a), s = sin(a);
                double *p = x + ((size_t)t * heads + h) * hd + 2 * i, x0 = p[0], x1 = p[1];
                p[0] = x0 * c - x1 * s;
                p[1] = x0 * s + x1 * c;
            }
}

/* The logits of every token of one sequence, tok[0 .. n) at positions 0 .. n-1. */
static void ref_forward(const llm_config *c, const ref_model *m, const int *tok, int n, double *logits) {
    int C = c->n_embd, H = c->n_head, KV = c->n_head_kv, hd = c->head_dim, F = c->n_ff, grp = H / KV;
    double *x = malloc(sizeof(double) * n * C), *xn = malloc(sizeof(double) * n * C);
    double *q = malloc(sizeof(double) * n * H * hd), *k = malloc(sizeof(double) * n * KV * hd);
    double *v = malloc(sizeof(double) * n * KV * hd), *att = malloc(sizeof(double) * n * H * hd);
    double *y = malloc(sizeof(double) * n * C), *g = malloc(sizeof(double) * n * F);
    double *u = malloc(sizeof(double) * n * F), *p = malloc(sizeof(double) * n);
    for (int t = 0; t < n; t++) memcpy(x + t * C, m->embd + (size_t)tok[t] * C, sizeof(double) * C);
    for (int l = 0; l < c->n_layer; l++) {
        double *const *W = m->layers[l].t;
        ref_rmsnorm(xn, x, W[LLM_ATTN_NORM], n, C, c->rms_eps);
        ref_linear(q, xn, W[LLM_WQ], n, H * hd, C);
        ref_linear(k, xn, W[LLM_WK], n, KV * hd, C);
        ref_linear(v, xn, W[LLM_WV], n, KV * hd, C);
        ref_rope(q, n, H, hd, c->rope_base);
        ref_rope(k, n, KV, hd, c->rope_base);
        for (int t = 0; t < n; t++)
            for (int h = 0; h < H; h++) {
                const double *qh = q + ((size_t)t * H + h) * hd;
                int kvh = h / grp;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    double d = 0;
                    for (int e = 0; e < hd; e++) d += qh[e] * k[((size_t)j * KV + kvh) * hd + e];
                    p[j] = d / sqrt((double)hd);
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
                for (int e = 0; e < hd; e++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++) acc += p[j] / sum * v[((size_t)j * KV + kvh) * hd + e];
                    att[((size_t)t * H + h) * hd + e] = acc;
                }
            }
        ref_linear(y, att, W[LLM_WO], n, C, H * hd);
        for (int i = 0; i < n * C; i++) x[i] += y[i];
        ref_rmsnorm(xn, x, W[LLM_FFN_NORM], n, C, c->rms_eps);
        ref_linear(g, xn, W[LLM_W_GATE], n, F, C);
        ref_linear(u, xn, W[LLM_W_UP], n, F, C);
        for (int i = 0; i < n * F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        ref_linear(y, g, W[LLM_W_DOWN], n, C, F);
        for (int i = 0; i < n * C; i++) x[i] += y[i];
    }
    ref_rmsnorm(xn, x, m->out_norm, n, C, c->rms_eps);
    ref_linear(logits, xn, m->out, n, c->n_vocab, C);
    free(x), free(xn), free(q), free(k), free(v), free(att), free(y), free(g), free(u), free(p);
}

/* ================================================================================== */
/* The model on the device                                                             */
/* ================================================================================== */

typedef struct {
    llm_config cfg;
    llm_weights w;
    llm_kv_cache cache;
    llm_workspace ws;
    float *logits; /* device [n_tokens_max, V] */
} model;

static void model_init(model *m, const llm_config *cfg, int n_seq, int n_tokens_max) {
    m->cfg = *cfg;
    llm_weights_random(&m->w, cfg, SEED);
    llm_kv_cache_init(&m->cache, cfg, NULL, n_seq, 0, 0, cfg->n_layer);
    llm_workspace_init(&m->ws, cfg, NULL, n_tokens_max);
    m->logits = pl_malloc_floats((size_t)n_tokens_max * cfg->n_vocab);
}
static void model_free(model *m) {
    pl_free(m->logits);
    llm_workspace_free(&m->ws);
    llm_kv_cache_free(&m->cache);
    llm_weights_free(&m->w, &m->cfg);
}

/* Run a batch and return its logits on the host (rows * V floats), *rows set; NULL and a
 * message on stderr if the batch was refused. */
static float *run(model *m, const int *tok, const int *seq, const int *pos, int n, int mode, int *rows) {
    int r = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, tok, seq, pos, n, m->logits, mode, NULL);
    if (rows) *rows = r;
    if (r < 0) {
        fprintf(stderr, "llm_forward refused a batch: %s\n", m->ws.err);
        return NULL;
    }
    return download(m->logits, (size_t)r * m->cfg.n_vocab);
}

/* The prompt of the tests: tokens from the counter RNG. */
static void prompt(int *tok, int n, uint64_t id) {
    for (int i = 0; i < n; i++) tok[i] = (int)(pl_rng_bits(SEED, id, (uint64_t)i) % (uint64_t)CFG.n_vocab);
}

/* ================================================================================== */
/* Tests                                                                               */
/* ================================================================================== */

enum { NP = 12 }; /* prompt length */

static void test_reference(model *m, const ref_model *ref, const char *label) {
    int tok[NP], seq[NP] = {0}, pos[NP], rows;
    prompt(tok, NP, 1);
    for (int i = 0; i < NP; i++) pos[i] = i;
    double *want = malloc(sizeof(double) * NP * m->cfg.n_vocab);
    ref_forward(&m->cfg, ref, tok, NP, want);
    llm_kv_cache_clear(&m->cache, -1);
    float *got = run(m, tok, seq, pos, NP, LLM_LOGITS_ALL, &rows);
    char what[160];
    snprintf(what, sizeof what, "%s: logits of a %d-token prompt vs the float64 forward", label, NP);
    check_err(what, got && rows == NP ? rel_err(got, want, (size_t)NP * m->cfg.n_vocab) : INFINITY, REF_TOL);

    /* the cache: a 5-token prefill, then one token per step, each step's logits the row of
     * the full-sequence reference at that position */
    llm_kv_cache_clear(&m->cache, -1);
    int np0 = 5;
    float *pre = run(m, tok, seq, pos, np0, LLM_LOGITS_LAST, &rows);
    double e = pre && rows == 1 ? rel_err(pre, want + (size_t)(np0 - 1) * m->cfg.n_vocab, m->cfg.n_vocab)
                                : INFINITY;
    for (int t = np0; t < NP; t++) {
        float *step = run(m, tok + t, seq, pos + t, 1, LLM_LOGITS_LAST, &rows);
        e = fmax(e, step && rows == 1 ? rel_err(step, want + (size_t)t * m->cfg.n_vocab, m->cfg.n_vocab)
                                      : INFINITY);
        free(step);
    }
    snprintf(what, sizeof what, "%s: prefill of %d tokens then %d decode steps give the full-sequence logits",
             label, np0, NP - np0);
    check_err(what, e, REF_TOL);
    free(pre);
    free(got);
    free(want);
}

/* Two sequences interleaved in one batch, then one decode step of both in one batch, equal
 * two separate runs of each. */
static void test_two_sequences(model *m) {
    enum { NA = 6, NB = 5 };
    int V = m->cfg.n_vocab, a[NA], b[NB], rows;
    prompt(a, NA, 2);
    prompt(b, NB, 3);
    int tok[NA + NB], seq[NA + NB], pos[NA + NB], ia = 0, ib = 0, n = 0;
    while (ia < NA || ib < NB) { /* a, b, a, b, ..., the rest of a */
        if (ia < NA) tok[n] = a[ia], seq[n] = 0, pos[n] = ia, ia++, n++;
        if (ib < NB) tok[n] = b[ib], seq[n] = 1, pos[n] = ib, ib++, n++;
    }
    llm_kv_cache_clear(&m->cache, -1);
    float *both = run(m, tok, seq, pos, n, LLM_LOGITS_ALL, &rows);
    int next[2] = {(a[0] + 7) % V, (b[0] + 11) % V}, nseq[2] = {0, 1}, npos[2] = {NA, NB};
    float *both_step = run(m, next, nseq, npos, 2, LLM_LOGITS_LAST, &rows);
    int rows_step = rows;

    int sa[NA + 1], sb[NB + 1], pa[NA + 1], pb[NB + 1], zero[NA + 1] = {0};
    for (int i = 0; i < NA; i++) sa[i] = a[i], pa[i] = i;
    for (int i = 0; i < NB; i++) sb[i] = b[i], pb[i] = i;
    sa[NA] = next[0], pa[NA] = NA, sb[NB] = next[1], pb[NB] = NB;
    llm_kv_cache_clear(&m->cache, -1);
    float *only_a = run(m, sa, zero, pa, NA + 1, LLM_LOGITS_ALL, &rows);
    llm_kv_cache_clear(&m->cache, -1);
    float *only_b = run(m, sb, zero, pb, NB + 1, LLM_LOGITS_ALL, &rows);

    double e = 0;
    for (int i = 0; i < n; i++) {
        const float *want = (seq[i] == 0 ? only_a : only_b) + (size_t)pos[i] * V;
        e = fmax(e, both && only_a && only_b ? rel_err_ff(both + (size_t)i * V, want, V) : INFINITY);
    }
    check_err("two sequences interleaved in one batch equal two separate runs", e, SAME_TOL);
    e = both_step && rows_step == 2 ? fmax(rel_err_ff(both_step, only_a + (size_t)NA * V, V),
                                           rel_err_ff(both_step + V, only_b + (size_t)NB * V, V))
                                    : INFINITY;
    check_err("one decode step of both sequences in one batch (logits of each last token) equals separate runs",
              e, SAME_TOL);
    free(both), free(both_step), free(only_a), free(only_b);
}

/* Greedy decoding with the argmax on the device, twice: the same tokens, and each one the
 * float64 forward's best token (or within 1e-4 of it: a float32 near-tie may pick either). */
static void test_greedy(model *m, const ref_model *ref) {
    enum { NPROMPT = 4, NGEN = 10 };
    int V = m->cfg.n_vocab, out[2][NPROMPT + NGEN];
    int *d_idx = pl_malloc(sizeof(int));
    int zero = 0, ok_ref = 1;
    for (int run_i = 0; run_i < 2; run_i++) {
        int *seq_tok = out[run_i];
        prompt(seq_tok, NPROMPT, 4);
        llm_kv_cache_clear(&m->cache, -1);
        int n = NPROMPT, pos[NPROMPT + NGEN], seqs[NPROMPT + NGEN] = {0};
        for (int i = 0; i < NPROMPT + NGEN; i++) pos[i] = i;
        int rows = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, seq_tok, seqs, pos, n, m->logits,
                               LLM_LOGITS_LAST, NULL);
        while (rows == 1 && n < NPROMPT + NGEN) {
            kern_argmax(d_idx, m->logits, 1, V, NULL);
            pl_device_sync();
            pl_download(&seq_tok[n], d_idx, sizeof(int));
            n++;
            if (n < NPROMPT + NGEN)
                rows = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, &seq_tok[n - 1], &zero, &pos[n - 1], 1,
                                   m->logits, LLM_LOGITS_LAST, NULL);
        }
        if (n < NPROMPT + NGEN) ok_ref = 0;
    }
    double *want = malloc(sizeof(double) * (NPROMPT + NGEN) * V);
    ref_forward(&m->cfg, ref, out[0], NPROMPT + NGEN, want);
    for (int t = NPROMPT; t < NPROMPT + NGEN; t++) {
        const double *row = want + (size_t)(t - 1) * V;
        double best = row[0];
        for (int j = 1; j < V; j++) best = fmax(best, row[j]);
        if (out[0][t] < 0 || out[0][t] >= V || row[out[0][t]] < best - 1e-4) ok_ref = 0;
    }
    char line[256];
    int len = snprintf(line, sizeof line, "# greedy:");
    for (int t = 0; t < NPROMPT + NGEN && len < (int)sizeof line - 8; t++)
        len += snprintf(line + len, sizeof line - len, " %d%s", out[0][t], t == NPROMPT - 1 ? " |" : "");
    if (pl_rank() == 0) printf("%s\n", line);
    tap_check(memcmp(out[0], out[1], sizeof out[0]) == 0, "greedy generation (argmax on the device) is deterministic");
    tap_check(ok_ref, "every greedy token is the float64 forward's best next token");
    free(want);
    pl_free(d_idx);
}

/* Bad batches: refused with one line naming the problem, the cache unchanged. */
static void test_bad_batches(model *m) {
    struct {
        const char *what, *expect;
        int tok, seq, pos;
    } cases[] = {
        {"token id past the vocabulary", "outside the vocabulary", 100, 0, 3},
        {"negative token id", "outside the vocabulary", -1, 0, 3},
        {"sequence id past n_seq_max", "sequence 2 outside", 5, 2, 0},
        {"position past the context", "outside the context", 5, 0, 32},
        {"position that leaves a hole", "leaves a hole", 5, 0, 4},
    };
    int tok[3], seq[3] = {0, 0, 0}, pos[3] = {0, 1, 2};
    prompt(tok, 3, 5);
    llm_kv_cache_clear(&m->cache, -1);
    int ok = run(m, tok, seq, pos, 3, LLM_LOGITS_LAST, NULL) != NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int t = cases[i].tok, s = cases[i].seq, p = cases[i].pos;
        int r = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, &t, &s, &p, 1, m->logits, LLM_LOGITS_LAST, NULL);
        char name[512];
        snprintf(name, sizeof name, "bad batch: %s is refused with a message (\"%s\"), the cache unchanged",
                 cases[i].what, m->ws.err);
        tap_check(ok && r == -1 && strstr(m->ws.err, cases[i].expect) && m->cache.seq_len[0] == 3 &&
                      m->cache.seq_len[1] == 0 && !strchr(m->ws.err, '\n'),
                  name);
    }
    /* a sequence whose tokens in one batch skip a position */
    int t2[2] = {1, 2}, s2[2] = {1, 1}, p2[2] = {0, 2};
    int r = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, t2, s2, p2, 2, m->logits, LLM_LOGITS_ALL, NULL);
    tap_check(r == -1 && strstr(m->ws.err, "must be at 1, not 2") && m->cache.seq_len[1] == 0,
              "bad batch: one sequence's tokens at positions 0 and 2 are refused");
    int big = m->ws.n_tokens_max + 1;
    int *many = calloc((size_t)big, sizeof(int));
    r = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, many, many, many, big, m->logits, LLM_LOGITS_ALL, NULL);
    tap_check(r == -1 && strstr(m->ws.err, "the workspace takes"), "bad batch: more tokens than the workspace holds");
    free(many);
    /* rewinding is allowed: position 1 again replaces the rest of the sequence */
    int t3 = tok[1], s3 = 0, p3 = 1;
    r = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, &t3, &s3, &p3, 1, m->logits, LLM_LOGITS_LAST, NULL);
    tap_check(r == 1 && m->cache.seq_len[0] == 2, "a token at an earlier position rewinds its sequence");
}

/* The pieces on a split model give the plain forward's logits: a layer range per cache
 * (layer split), a linear hook that computes each projection in row blocks through
 * llm_linear views and writes them at their offsets (row split), and head/FFN shards
 * whose partial sums are added (tensor parallelism, one rank playing every shard). */
typedef struct {
    const llm_config *cfg;
    int blocks;
} rowsplit_ctx;

static void rowsplit_linear(const llm_split *sp, llm_tensor which, int layer, llm_mat W, float *y,
                            const float *x, int n_tokens, int n_out, int n_in, pl_stream *s) {
    const rowsplit_ctx *c = sp->ctx;
    (void)which, (void)layer;
    for (int b = 0; b < c->blocks; b++) { /* rank b's rows, rounded like llama.cpp: the last takes the rest */
        int r0 = n_out * b / c->blocks / 4 * 4, r1 = b == c->blocks - 1 ? n_out : n_out * (b + 1) / c->blocks / 4 * 4;
        if (r1 > r0) llm_linear(y + r0, n_out, x, n_in, llm_mat_rows(W, n_in, r0), r1 - r0, n_in, n_tokens, s);
    }
}

static float *forward_pieces(model *m, const llm_split *sp, llm_kv_cache *caches, const int *layer_end,
                             int n_caches, const int *tok, const int *seq, const int *pos, int n) {
    int rows = -1;
    for (int c = 0; c < n_caches; c++) {
        llm_kv_cache_clear(&caches[c], -1);
        rows = llm_batch_prepare(&m->ws, &caches[c], &m->cfg, tok, seq, pos, n, LLM_LOGITS_ALL);
    }
    if (rows != n) return NULL;
    llm_embed(&m->cfg, &m->w, &m->ws, m->ws.x, NULL);
    for (int l = 0, c = 0; l < m->cfg.n_layer; l++) {
        while (l >= layer_end[c]) c++;
        llm_layer_forward(&m->cfg, &m->w.layers[l], l, sp, &caches[c], &m->ws, m->ws.x, NULL);
    }
    llm_head(&m->cfg, &m->w, sp, &m->ws, m->ws.x, m->logits, NULL);
    return download(m->logits, (size_t)n * m->cfg.n_vocab);
}

static void test_split_pieces(model *m) {
    const llm_config *cfg = &m->cfg;
    int tok[NP], seq[NP] = {0}, pos[NP], rows, V = cfg->n_vocab;
    prompt(tok, NP, 6);
    for (int i = 0; i < NP; i++) pos[i] = i;
    llm_kv_cache_clear(&m->cache, -1);
    float *plain = run(m, tok, seq, pos, NP, LLM_LOGITS_ALL, &rows);

    /* layer split: layers [0, 2) and [2, 3) in two caches */
    llm_kv_cache two[2];
    int ends[2] = {2, 3};
    llm_kv_cache_init(&two[0], cfg, NULL, 1, 0, 0, 2);
    llm_kv_cache_init(&two[1], cfg, NULL, 1, 0, 2, 1);
    float *got = forward_pieces(m, NULL, two, ends, 2, tok, seq, pos, NP);
    check_err("layer split: layers 0-1 and 2 with a KV cache each give the plain logits",
              got && plain ? rel_err_ff(got, plain, (size_t)NP * V) : INFINITY, SAME_TOL);
    tap_check(llm_kv_cache_bytes(&two[0]) == 2 * 4 * 2 * (size_t)cfg->n_ctx * cfg->n_head_kv * cfg->head_dim &&
                  llm_kv_cache_bytes(&two[1]) * 2 == llm_kv_cache_bytes(&two[0]),
              "KV-cache bytes = 2 (K, V) * 4 * layers * seqs * n_ctx * n_kv_heads * head_dim");
    free(got);
    llm_kv_cache_free(&two[0]);
    llm_kv_cache_free(&two[1]);

    /* row split: every projection, the output included, in 3 row blocks */
    rowsplit_ctx rc = {cfg, 3};
    llm_split rs = llm_split_full(cfg);
    rs.linear = rowsplit_linear;
    rs.ctx = &rc;
    got = forward_pieces(m, &rs, &m->cache, &cfg->n_layer, 1, tok, seq, pos, NP);
    check_err("row split: each projection computed in 3 row blocks (llm_linear on views) gives the plain logits",
              got && plain ? rel_err_ff(got, plain, (size_t)NP * V) : INFINITY, SAME_TOL);
    free(got);

    /* tensor parallelism, one rank playing all shards of layer 0: the partial attention and
     * FFN outputs of 2 shards (whole KV groups) and of 6 shards (one head each, the KV head
     * replicated) add up to the whole layer's */
    llm_kv_cache_clear(&m->cache, -1);
    llm_batch_prepare(&m->ws, &m->cache, cfg, tok, seq, pos, NP, LLM_LOGITS_ALL);
    size_t nc = (size_t)NP * cfg->n_embd;
    llm_embed(cfg, &m->w, &m->ws, m->ws.x, NULL);
    llm_attention(cfg, &m->w.layers[0], 0, NULL, &m->cache, &m->ws, m->ws.y, m->ws.x, NULL);
    float *whole_att = download(m->ws.y, nc);
    llm_ffn(cfg, &m->w.layers[0], 0, NULL, &m->ws, m->ws.y, m->ws.x, NULL);
    float *whole_ffn = download(m->ws.y, nc);
    float *x = download(m->ws.x, nc);
    for (int shards = 2; shards <= 6; shards += 4) {
        float *sum_att = calloc(nc, sizeof(float)), *sum_ffn = calloc(nc, sizeof(float));
        int kv_bytes_ok = 1;
        for (int r = 0; r < shards; r++) {
            llm_split sp = {cfg->n_head / shards * r, cfg->n_head / shards, cfg->n_ff / shards * r,
                            cfg->n_ff / shards, NULL, NULL, NULL};
            llm_layer_weights lw;
            llm_kv_cache c;
            llm_workspace ws;
            llm_layer_weights_shard(&lw, &m->w.layers[0], cfg, &sp);
            llm_kv_cache_init(&c, cfg, &sp, 1, 0, 0, 1);
            llm_workspace_init(&ws, cfg, &sp, NP);
            /* 3 heads (2 shards) are one KV group, 1 head (6 shards) reads one KV head */
            kv_bytes_ok &= llm_kv_cache_bytes(&c) == 2 * sizeof(float) * (size_t)cfg->n_ctx * 1 * cfg->head_dim;
            llm_batch_prepare(&ws, &c, cfg, tok, seq, pos, NP, LLM_LOGITS_ALL);
            pl_upload(ws.x, x, nc * sizeof(float));
            llm_attention(cfg, &lw, 0, &sp, &c, &ws, ws.y, ws.x, NULL);
            float *part = download(ws.y, nc);
            for (size_t i = 0; i < nc; i++) sum_att[i] += part[i];
            free(part);
            llm_ffn(cfg, &lw, 0, &sp, &ws, ws.y, ws.x, NULL);
            part = download(ws.y, nc);
            for (size_t i = 0; i < nc; i++) sum_ffn[i] += part[i];
            free(part);
            llm_workspace_free(&ws);
            llm_kv_cache_free(&c);
            llm_layer_weights_free(&lw);
        }
        char what[200];
        snprintf(what, sizeof what,
                 "tensor parallelism: %d shards' partial attention and FFN outputs add up to the whole layer's", shards);
        check_err(what, fmax(rel_err_ff(sum_att, whole_att, nc), rel_err_ff(sum_ffn, whole_ffn, nc)), SAME_TOL);
        snprintf(what, sizeof what, "tensor parallelism: a shard's KV cache holds only its KV heads (%d shards)", shards);
        tap_check(kv_bytes_ok, what);
        free(sum_att), free(sum_ffn);
    }
    /* shards built from the RNG directly equal shards cut from the whole layer */
    llm_split half = {3, 3, 48, 48, NULL, NULL, NULL};
    llm_layer_weights a, b;
    llm_layer_weights_random(&a, cfg, &half, 0, SEED);
    llm_layer_weights_shard(&b, &m->w.layers[0], cfg, &half);
    float *wa = download(a.wo.data, (size_t)cfg->n_embd * 24), *wb = download(b.wo.data, (size_t)cfg->n_embd * 24);
    float *da = download(a.w_down.data, (size_t)cfg->n_embd * 48), *db = download(b.w_down.data, (size_t)cfg->n_embd * 48);
    tap_check(!memcmp(wa, wb, sizeof(float) * cfg->n_embd * 24) && !memcmp(da, db, sizeof(float) * cfg->n_embd * 48),
              "a shard drawn from the counter RNG equals the same shard cut from the whole layer (bit for bit)");
    free(wa), free(wb), free(da), free(db);
    llm_layer_weights_free(&a);
    llm_layer_weights_free(&b);
    char err[256];
    llm_split bad = {2, 2, 0, 96, NULL, NULL, NULL};
    tap_check(llm_split_check(cfg, &bad, err, sizeof err) == -1 && strstr(err, "whole KV groups"),
              "a split whose heads straddle two KV groups is refused with a message");
    free(x), free(whole_att), free(whole_ffn), free(plain);
}

/* At np > 1: real tensor parallelism, rank r holding heads and FFN features r of world,
 * the partial sums all-reduced by the split's hook; every rank's logits equal the plain
 * forward's. */
static void tp_allreduce(const llm_split *sp, float *y, size_t count, pl_stream *s) {
    (void)sp;
    pl_allreduce(y, y, count, PL_SUM, pl_comm_world(), s);
}

static void test_tensor_parallel(model *m) {
    int world = pl_world(), r = pl_rank();
    const llm_config *cfg = &m->cfg;
    llm_split sp = {cfg->n_head / world * r, cfg->n_head / world, cfg->n_ff / world * r, cfg->n_ff / world, NULL,
                    tp_allreduce, NULL};
    char err[256];
    int fits = !(cfg->n_head % world || cfg->n_ff % world || llm_split_check(cfg, &sp, err, sizeof err)), all = 0;
    MPI_Allreduce(&fits, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* every rank must take the same branch */
    if (!all) {
        if (r == 0) printf("# tensor parallelism at np %d: the tiny model does not split that way (skipped)\n", world);
        return;
    }
    int tok[NP], seq[NP] = {0}, pos[NP], rows;
    prompt(tok, NP, 7);
    for (int i = 0; i < NP; i++) pos[i] = i;
    llm_kv_cache_clear(&m->cache, -1);
    float *plain = run(m, tok, seq, pos, NP, LLM_LOGITS_ALL, &rows);
    llm_weights w = m->w;
    w.layers = calloc((size_t)cfg->n_layer, sizeof *w.layers);
    for (int l = 0; l < cfg->n_layer; l++) llm_layer_weights_random(&w.layers[l], cfg, &sp, l, SEED);
    llm_kv_cache c;
    llm_workspace ws;
    llm_kv_cache_init(&c, cfg, &sp, 1, 0, 0, cfg->n_layer);
    llm_workspace_init(&ws, cfg, &sp, NP);
    llm_batch_prepare(&ws, &c, cfg, tok, seq, pos, NP, LLM_LOGITS_ALL);
    llm_embed(cfg, &w, &ws, ws.x, NULL);
    for (int l = 0; l < cfg->n_layer; l++) llm_layer_forward(cfg, &w.layers[l], l, &sp, &c, &ws, ws.x, NULL);
    llm_head(cfg, &w, NULL, &ws, ws.x, m->logits, NULL);
    float *got = download(m->logits, (size_t)NP * cfg->n_vocab);
    char what[200];
    snprintf(what, sizeof what, "tensor parallelism over %d ranks (heads and FFN split, all-reduce hook) gives the plain logits",
             world);
    check_err(what, plain ? rel_err_ff(got, plain, (size_t)NP * cfg->n_vocab) : INFINITY, SAME_TOL);
    free(got), free(plain);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&c);
    for (int l = 0; l < cfg->n_layer; l++) llm_layer_weights_free(&w.layers[l]);
    free(w.layers);
}

/* What one forward records: per layer 2 rmsnorm, 2 rope, 1 kv_store, 1 attention, 1
 * swiglu, 2 residual kernels and 7 GEMMs; plus the embedding gather, the final norm and
 * the output GEMM. */
static void test_trace(model *m) {
    int tok[NP], seq[NP] = {0}, pos[NP], L = m->cfg.n_layer;
    prompt(tok, NP, 8);
    for (int i = 0; i < NP; i++) pos[i] = i;
    llm_kv_cache_clear(&m->cache, -1);
    pl_device_sync();
    size_t first = pl_trace_count();
    int rows = llm_forward(&m->cfg, &m->w, &m->cache, &m->ws, tok, seq, pos, NP, m->logits, LLM_LOGITS_ALL, NULL);
    pl_device_sync();
    const pl_trace_event *ev = pl_trace_events();
    int n_norm = 0, n_rope = 0, n_store = 0, n_att = 0, n_glu = 0, n_res = 0, n_gather = 0, n_gemm = 0;
    for (size_t i = first; i < pl_trace_count(); i++) {
        const char *nm = ev[i].name ? ev[i].name : "";
        if (ev[i].kind == PL_OP_GEMM) n_gemm++;
        n_norm += !strcmp(nm, "rmsnorm_fwd"), n_rope += !strcmp(nm, "rope_fwd"), n_store += !strcmp(nm, "kv_store");
        n_att += !strcmp(nm, "gqa_attention_fwd"), n_glu += !strcmp(nm, "swiglu_fwd");
        n_res += !strcmp(nm, "residual_fwd"), n_gather += !strcmp(nm, "gather_rows");
    }
    char what[240];
    snprintf(what, sizeof what,
             "trace of one forward: %d rmsnorm, %d rope, %d kv_store, %d attention, %d swiglu, %d residual, %d gather, %d GEMMs",
             n_norm, n_rope, n_store, n_att, n_glu, n_res, n_gather, n_gemm);
    tap_check(rows == NP && n_norm == 2 * L + 1 && n_rope == 2 * L && n_store == L && n_att == L && n_glu == L &&
                  n_res == 2 * L && n_gather == 1 && n_gemm == 7 * L + 1,
              what);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    model m;
    ref_model ref;
    model_init(&m, &CFG, 2, 16);
    ref_load(&ref, &CFG, &m.w);
    test_reference(&m, &ref, "untied output");
    test_two_sequences(&m);
    test_greedy(&m, &ref);
    test_bad_batches(&m);
    test_split_pieces(&m);
    test_tensor_parallel(&m);
    test_trace(&m);
    ref_free(&ref, &CFG);
    model_free(&m);

    /* the same checks that need the reference once more with the output tied to the
     * embedding (SmolLM2's layout) and plain multi-head attention (n_head_kv = n_head) */
    llm_config tied = CFG;
    tied.tied_output = true;
    tied.n_head_kv = tied.n_head;
    model_init(&m, &tied, 1, 16);
    ref_load(&ref, &tied, &m.w);
    test_reference(&m, &ref, "tied output, n_head_kv = n_head");
    ref_free(&ref, &tied);
    model_free(&m);
    return tap_finish();
}
