/* test_llama_gguf.c - llm_load_gguf: the project's tiny GGUF llama (written here with
 * datasets/ds_gguf_write.c) loads with its config, every tensor in the right place and
 * orientation (each within its type's quantisation error of the master weights it was
 * made from), tied or not; broken files are refused with one line. When SmolLM2 is present
 * ($GGUF, or datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf from scripts/fetch-model.sh)
 * it is loaded too: finite logits, the fact the model knows (" Paris" after "The capital
 * of France is"), and "# " lines with its greedy continuation and the time per token.
 *
 *   mpirun -np 1 build/cpu/tests/test_llama_gguf
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record
#include "ds_bpe.h"         // defines: ds_bpe_from_gguf, ds_bpe_encode, ds_bpe_decode
#include "ds_gguf.h"        // defines: ds_tiny_llama_write, ds_tiny_llama_weight, ds_gguf_open
#include "kern_argmax.h"
#include "llama.h"

#define SEED 31

/* The largest relative Frobenius error a tensor of this type may have against the floats
 * it was quantised from: Q8_0 rounds to 1/254 of a block's range, Q4 to 1/30 of it. */
static double quant_tol(uint32_t type) {
    switch (type) {
    case DS_GGML_F32: return 0.0;
    case DS_GGML_F16: return 1e-3;
    case DS_GGML_Q8_0: return 1e-2;
    default: return 0.15;
    }
}

static const int tiny_kind[LLM_N_TENSORS] = {
    DS_TINY_ATTN_NORM, DS_TINY_ATTN_Q, DS_TINY_ATTN_K, DS_TINY_ATTN_V, DS_TINY_ATTN_OUTPUT, DS_TINY_FFN_NORM,
    DS_TINY_FFN_GATE,  DS_TINY_FFN_UP, DS_TINY_FFN_DOWN, DS_TINY_TOKEN_EMBD, DS_TINY_OUTPUT_NORM, DS_TINY_OUTPUT};

/* Every tensor against the master values; the worst error / tolerance ratio, and where. */
static double worst_tensor(const ds_gguf *g, const llm_config *c, const llm_weights *w, char *where, size_t len) {
    double worst = 0;
    for (int l = -1; l < c->n_layer; l++)
        for (int t = 0; t < LLM_N_TENSORS; t++) {
            if ((l < 0) != (t >= LLM_N_LAYER_TENSORS)) continue;
            const llm_layer_weights *lw = l >= 0 ? &w->layers[l] : NULL;
            const void *dev[LLM_N_TENSORS] = {
                lw ? lw->attn_norm : 0,      lw ? lw->wq.data : 0,     lw ? lw->wk.data : 0,   lw ? lw->wv.data : 0,
                lw ? lw->wo.data : 0,        lw ? lw->ffn_norm : 0,    lw ? lw->w_gate.data : 0,
                lw ? lw->w_up.data : 0,      lw ? lw->w_down.data : 0, w->token_embd.data,
                w->output_norm,              w->output.data};
            char name[96];
            llm_tensor_gguf_name((llm_tensor)t, l, name, sizeof name);
            bool tied_out = t == LLM_OUTPUT && !ds_gguf_find_tensor(g, "output.weight");
            const ds_gguf_tensor *gt = ds_gguf_find_tensor(g, tied_out ? "token_embd.weight" : name);
            int kind = tied_out ? DS_TINY_TOKEN_EMBD : tiny_kind[t];
            int64_t rows, cols;
            llm_tensor_shape(c, (llm_tensor)t, &rows, &cols);
            float *h = download(dev[t], (size_t)(rows * cols));
            double num = 0, den = 0;
            for (int64_t i = 0; i < rows * cols; i++) {
                double want = ds_tiny_llama_weight(SEED, l, kind, cols, i);
                num += (h[i] - want) * (h[i] - want);
                den += want * want;
            }
            double tol = quant_tol(gt ? gt->type : DS_GGML_F32), e = sqrt(num / den);
            double ratio = tol > 0 ? e / tol : (e == 0 ? 0 : INFINITY);
            if (ratio > worst) {
                worst = ratio;
                snprintf(where, len, "%s (%s): rel err %.2e, tolerance %.2g", name,
                         gt ? ds_ggml_type_name(gt->type) : "?", e, tol);
            }
            free(h);
        }
    return worst;
}

/* The same file loaded in its stored types: every Q4_0/Q4_1/Q8_0 matrix is the file's blocks,
 * byte for byte, F16 and F32 ones float32; the bytes held are those; and the forward on the
 * blocks gives the float32 forward's logits (want: 4 x V, from the dequantised weights) up
 * to the rounding of the products' sums (kern_qmatmul.h): 1e-5 relative. */
static void test_tiny_quantised(const char *path, const llm_config *c, const llm_weights *wf, const float *want) {
    char err[512], what[600];
    llm_config qc;
    llm_weights q;
    if (!want || llm_load_gguf(path, &qc, &q, err, sizeof err)) {
        snprintf(what, sizeof what, "tiny GGUF llama loads in its stored types: %s", want ? err : "no float32 logits");
        tap_check(0, what);
        return;
    }
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    bool same = g != NULL;
    size_t expect = 0;
    for (int l = 0; g && l < c->n_layer; l++)
        for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
            const llm_layer_weights *lw = &q.layers[l];
            llm_mat m[LLM_N_LAYER_TENSORS] = {{lw->attn_norm, LLM_F32}, lw->wq, lw->wk, lw->wv, lw->wo,
                                              {lw->ffn_norm, LLM_F32}, lw->w_gate, lw->w_up, lw->w_down};
            char name[96];
            const ds_gguf_tensor *gt = ds_gguf_find_tensor(g, llm_tensor_gguf_name((llm_tensor)t, l, name, sizeof name));
            bool quant = gt->type == DS_GGML_Q4_0 || gt->type == DS_GGML_Q4_1 || gt->type == DS_GGML_Q8_0;
            same &= m[t].type == (quant ? (int)gt->type : LLM_F32);
            size_t bytes = quant ? gt->nbytes : (size_t)gt->nelements * 4;
            expect += bytes;
            if (quant && same) {
                uint8_t *h = malloc(bytes);
                pl_download(h, m[t].data, bytes);
                same &= !memcmp(h, gt->data, bytes);
                free(h);
            }
        }
    const ds_gguf_tensor *emb = g ? ds_gguf_find_tensor(g, "token_embd.weight") : NULL, *out = g ? ds_gguf_find_tensor(g, "output.weight") : NULL;
    expect += emb ? emb->nbytes : 0;
    expect += out ? (size_t)out->nelements * 4 : 0; /* F16: held as float32 */
    expect += (size_t)c->n_embd * 4;
    if (g) ds_gguf_close(g);
    snprintf(what, sizeof what, "tiny GGUF llama in its stored types: the quantised matrices are the file's blocks byte "
             "for byte, the others float32; %zu bytes held (%zu as float32)", llm_weights_bytes(&q, &qc),
             llm_weights_bytes(wf, c));
    tap_check(same && llm_weights_bytes(&q, &qc) == expect, what);
    llm_kv_cache kv;
    llm_workspace ws;
    llm_kv_cache_init(&kv, c, NULL, 1, 0, 0, c->n_layer);
    llm_workspace_init(&ws, c, NULL, 8);
    float *logits = pl_malloc_floats((size_t)8 * c->n_vocab);
    int tok[4] = {5, 17, 42, 9}, seq[4] = {0}, pos[4] = {0, 1, 2, 3};
    int rows = llm_forward(c, &q, &kv, &ws, tok, seq, pos, 4, logits, LLM_LOGITS_ALL, NULL);
    float *h = rows == 4 ? download(logits, (size_t)4 * c->n_vocab) : NULL;
    double e = h ? rel_err_ff(h, want, (size_t)4 * c->n_vocab) : INFINITY;
    snprintf(what, sizeof what, "tiny GGUF llama: the forward on the quantised blocks gives the float32 forward's logits "
             "(relative %.2e <= 1e-5)", e);
    tap_check(e <= 1e-5, what);
    free(h);
    pl_free(logits);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&kv);
    llm_weights_free(&q, &qc);
}

static void test_tiny(bool with_output) {
    char path[128], err[512], what[1024], where[256] = "none";
    snprintf(path, sizeof path, "/tmp/paralab-tiny-llama-%d-%d.gguf", (int)getpid(), (int)with_output);
    int wrote = ds_tiny_llama_write(path, SEED, NULL, with_output, err, sizeof err) == 0;
    llm_config c;
    llm_weights w;
    int loaded = wrote && llm_load_gguf_f32(path, &c, &w, err, sizeof err) == 0;
    snprintf(what, sizeof what, "tiny GGUF llama (%s output) loads: %s", with_output ? "its own" : "tied",
             loaded ? "ok" : err);
    tap_check(loaded, what);
    if (!loaded) return;
    tap_check(c.n_layer == DS_TINY_N_LAYER && c.n_embd == DS_TINY_N_EMBD && c.n_ff == DS_TINY_N_FF &&
                  c.n_head == DS_TINY_N_HEAD && c.n_head_kv == DS_TINY_N_HEAD_KV &&
                  c.head_dim == DS_TINY_N_EMBD / DS_TINY_N_HEAD && c.n_vocab == ds_tiny_llama_vocab() &&
                  c.n_ctx == DS_TINY_N_CTX && c.rope_base == DS_TINY_ROPE_BASE && c.rms_eps == DS_TINY_RMS_EPS &&
                  c.tied_output == !with_output && (w.output.data == w.token_embd.data) == !with_output,
              "tiny GGUF llama: the config read from the file is the one it was written with");
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    double worst = g ? worst_tensor(g, &c, &w, where, sizeof where) : INFINITY;
    if (g) ds_gguf_close(g);
    snprintf(what, sizeof what,
             "tiny GGUF llama: every tensor is the master it was quantised from, in [out, in] order (worst: %s)", where);
    tap_check(worst <= 1.0, what);

    /* and it runs: a short prompt's logits are finite */
    llm_kv_cache kv;
    llm_workspace ws;
    llm_kv_cache_init(&kv, &c, NULL, 1, 0, 0, c.n_layer);
    llm_workspace_init(&ws, &c, NULL, 8);
    float *logits = pl_malloc_floats((size_t)8 * c.n_vocab);
    int tok[4] = {5, 17, 42, 9}, seq[4] = {0}, pos[4] = {0, 1, 2, 3};
    int rows = llm_forward(&c, &w, &kv, &ws, tok, seq, pos, 4, logits, LLM_LOGITS_ALL, NULL);
    float *h = rows == 4 ? download(logits, (size_t)4 * c.n_vocab) : NULL;
    int finite = h != NULL;
    for (int i = 0; h && i < 4 * c.n_vocab; i++) finite &= isfinite(h[i]) != 0;
    tap_check(finite, "tiny GGUF llama: the forward of a 4-token prompt gives finite logits");
    test_tiny_quantised(path, &c, &w, h);
    free(h);
    pl_free(logits);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&kv);

    /* a layer-split rank's part: layers 1 and 2 and the head, nothing else */
    llm_config pc;
    llm_weights part;
    int got = llm_load_gguf_part(path, &pc, &part, 1, 2, false, true, true, err, sizeof err) == 0;
    size_t nq = (size_t)c.n_head * c.head_dim * c.n_embd, nv = (size_t)c.n_vocab * c.n_embd;
    int same = got && part.layers[0].wq.data == NULL && part.layers[3].w_down.data == NULL &&
               part.token_embd.data == NULL && part.layers[1].wq.data && part.layers[2].w_down.data &&
               part.output.data && part.output_norm;
    if (same) {
        float *a = download(part.layers[2].wq.data, nq), *b = download(w.layers[2].wq.data, nq);
        float *oa = download(part.output.data, nv), *ob = download(w.output.data, nv);
        same = !memcmp(a, b, nq * 4) && !memcmp(oa, ob, nv * 4);
        free(a), free(b), free(oa), free(ob);
    }
    snprintf(what, sizeof what, "tiny GGUF llama: a layer-split rank loads layers 1-2 and the %s head only, the same bits",
             with_output ? "untied" : "tied");
    tap_check(same, what);
    if (got) llm_weights_free(&part, &pc);
    int r = llm_load_gguf_part(path, &pc, &part, 3, 2, true, false, false, err, sizeof err);
    snprintf(what, sizeof what, "tiny GGUF llama: layers past the model are refused (\"%s\")", err);
    tap_check(r == -1 && strstr(err, "the model has layers 0 .. 3"), what);
    llm_weights_free(&w, &c);

    /* broken files: refused with one line, nothing left allocated */
    if (with_output) {
        FILE *f = fopen(path, "rb");
        char cut[160];
        snprintf(cut, sizeof cut, "%s.cut", path);
        FILE *o = fopen(cut, "wb");
        int ok = f && o;
        if (ok) {
            fseek(f, 0, SEEK_END);
            long len = ftell(f);
            fseek(f, 0, SEEK_SET);
            char *buf = malloc((size_t)len);
            ok = fread(buf, 1, (size_t)len, f) == (size_t)len && fwrite(buf, 1, (size_t)len - 100, o) == (size_t)len - 100;
            free(buf);
        }
        if (f) fclose(f);
        if (o) fclose(o);
        size_t before = pl_mem_in_use();
        int r = llm_load_gguf(cut, &c, &w, err, sizeof err);
        snprintf(what, sizeof what, "a truncated GGUF is refused with one line (\"%s\") and nothing allocated", err);
        tap_check(ok && r == -1 && !strchr(err, '\n') && strstr(err, cut) && pl_mem_in_use() == before, what);
        r = llm_load_gguf("/nonexistent/model.gguf", &c, &w, err, sizeof err);
        snprintf(what, sizeof what, "a missing file is refused with one line (\"%s\")", err);
        tap_check(r == -1 && strstr(err, "/nonexistent/model.gguf") && !strchr(err, '\n'), what);
        remove(cut);
    }
    remove(path);
}

/* ================================================================================== */
/* SmolLM2                                                                             */
/* ================================================================================== */

static void test_smollm2(const char *path) {
    char err[512], what[1024];
    double t0 = pl_now();
    llm_config c;
    llm_weights w;
    if (llm_load_gguf(path, &c, &w, err, sizeof err)) {
        snprintf(what, sizeof what, "SmolLM2 loads from %s: %s", path, err);
        tap_check(0, what);
        return;
    }
    double t_load = pl_now() - t0;
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    ds_bpe *bpe = g ? ds_bpe_from_gguf(g, err, sizeof err) : NULL;
    if (g) ds_gguf_close(g);
    if (!bpe) {
        snprintf(what, sizeof what, "SmolLM2's tokenizer loads: %s", err);
        tap_check(0, what);
        llm_weights_free(&w, &c);
        return;
    }
    if (pl_rank() == 0)
        printf("# SmolLM2: %d layers, n_embd %d, n_ff %d, %d heads (%d KV) of %d, vocab %d, rope base %g, loaded (weights "
               "kept in its stored types) in %.2f s\n",
               c.n_layer, c.n_embd, c.n_ff, c.n_head, c.n_head_kv, c.head_dim, c.n_vocab, c.rope_base, t_load);

    enum { NGEN = 16, NMAX = 64 };
    const char *text = "The capital of France is";
    int32_t ids[NMAX];
    int64_t n = ds_bpe_encode(bpe, text, strlen(text), 0, ids, NMAX - NGEN, err, sizeof err);
    llm_kv_cache kv;
    llm_workspace ws;
    llm_kv_cache_init(&kv, &c, NULL, 1, 256, 0, c.n_layer);
    llm_workspace_init(&ws, &c, NULL, NMAX);
    float *logits = pl_malloc_floats((size_t)NMAX * c.n_vocab);
    int tok[NMAX], seq[NMAX] = {0}, pos[NMAX];
    for (int i = 0; i < NMAX; i++) pos[i] = i;
    for (int i = 0; i < n; i++) tok[i] = ids[i];
    int rows = n > 0 && n <= NMAX - NGEN
                   ? llm_forward(&c, &w, &kv, &ws, tok, seq, pos, (int)n, logits, LLM_LOGITS_ALL, NULL)
                   : -1;
    float *h = rows == n ? download(logits, (size_t)n * c.n_vocab) : NULL;
    int finite = h != NULL, best = 0;
    for (int64_t i = 0; h && i < n * c.n_vocab; i++) finite &= isfinite(h[i]) != 0;
    const float *last = h ? h + (size_t)(n - 1) * c.n_vocab : NULL;
    for (int j = 1; last && j < c.n_vocab; j++)
        if (last[j] > last[best]) best = j;
    snprintf(what, sizeof what, "SmolLM2: the logits of \"%s\" (%d tokens) are finite", text, (int)n);
    tap_check(finite, what);
    char word[64] = "";
    if (h) ds_bpe_decode(bpe, &best, 1, word, sizeof word, err, sizeof err);
    snprintf(what, sizeof what, "SmolLM2: the most likely next token after \"%s\" is \" Paris\" (got \"%s\", logit %.3f)",
             text, word, last ? last[best] : 0.0f);
    tap_check(strcmp(word, " Paris") == 0, what);
    free(h);

    /* greedy continuation, one token per step, the argmax on the device */
    int *d_idx = pl_malloc(sizeof(int));
    int total = (int)n;
    double t1 = pl_now();
    while (rows > 0 && total < n + NGEN) {
        kern_argmax(d_idx, logits + (size_t)(rows - 1) * c.n_vocab, 1, c.n_vocab, NULL);
        pl_device_sync();
        pl_download(&tok[total], d_idx, sizeof(int));
        total++;
        if (total < n + NGEN)
            rows = llm_forward(&c, &w, &kv, &ws, &tok[total - 1], seq, &pos[total - 1], 1, logits, LLM_LOGITS_LAST, NULL);
    }
    double per_token = (pl_now() - t1) / NGEN;
    char out[512] = "";
    int32_t gen[NGEN];
    for (int i = 0; i < NGEN; i++) gen[i] = tok[n + i];
    ds_bpe_decode(bpe, gen, total - n, out, sizeof out, err, sizeof err);
    for (char *p = out; *p; p++)
        if (*p == '\n') *p = ' '; /* one "# " line */
    if (pl_rank() == 0) {
        printf("# SmolLM2 greedy: \"%s\" ->\"%s\"\n", text, out);
        printf("# SmolLM2 decode on the %s device: %.1f ms per token (KV cache %.1f MiB)\n",
               pl_device_name(pl_info()->device), 1e3 * per_token, llm_kv_cache_bytes(&kv) / 1048576.0);
    }
    pl_free(d_idx);
    pl_free(logits);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&kv);
    ds_bpe_free(bpe);
    llm_weights_free(&w, &c);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_tiny(true);
    test_tiny(false);
    const char *env = getenv("GGUF");
    const char *path = env && *env ? env : "datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(path, R_OK) == 0) test_smollm2(path);
    else if (pl_rank() == 0)
        printf("# no SmolLM2 file at %s (scripts/fetch-model.sh fetches it): the real-model checks are skipped\n", path);
    return tap_finish();
}
