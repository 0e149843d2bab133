/* lab05_model.c - the model file of Lab 5, as each side opens it.
 *
 * --model smollm2 reads SmolLM2-135M-Instruct.Q4_1.gguf ($GGUF, else datasets/cache/ where
 * scripts/fetch-model.sh puts it; --gguf FILE wins); --model tiny writes the project's tiny
 * llama (datasets/ds_gguf_write.c) to a temporary file. In a graded run the referee does
 * this once, before its player exists, and hands the player the path (--gguf): the player
 * maps the same file in its start-up (it cannot open files once its play filter is on), and
 * the referee removes a temporary file once the player has it. A mode (RUN=chat...) has no
 * referee: the player opens or writes the file itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> // defines: access, close, unlink

#include "lab05.h"

#define SMOLLM2_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

/* The tiny model of the self-tests: SmolLM2's proportions (9 query heads over 3 KV heads,
 * F = 8/3 C, a tied output) at 1/2 its width and 1/5 its depth, so that the row split's
 * rounding to 128 rows leaves ranks with 0 rows as it does on SmolLM2's 192-row K and V. */
static const ds_llama_config TINY = {.n_layer = 6, .n_embd = 288, .n_ff = 768, .n_head = 9, .n_head_kv = 3,
                                     .n_ctx = 256, .rope_freq_base = 10000.0f, .rms_eps = 1e-5f};

void lab5_model_forget(lab5_model *m) {
    if (m->tmp) unlink(m->path); /* the mapping stays valid */
    m->tmp = false;
}

/* Every rank decides alike (same flags, same file), so a usage error is safe here. */
static void resolve_path(lab5_model *m, uint64_t seed) {
    const lab5_flags *f = lab5_opts();
    if (f->gguf && *f->gguf) {
        snprintf(m->path, sizeof m->path, "%s", f->gguf);
    } else if (!strcmp(f->model, "smollm2")) {
        const char *env = getenv("GGUF");
        snprintf(m->path, sizeof m->path, "%s", env && *env ? env : "datasets/cache/" SMOLLM2_FILE);
        if (access(m->path, R_OK) != 0)
            pl_usage_error("%s: SmolLM2 is not there: run scripts/fetch-model.sh (or give GGUF=/path/to/%s), "
                           "or --model tiny", m->path, SMOLLM2_FILE);
    } else if (!strcmp(f->model, "tiny")) {
        const char *dir = getenv("TMPDIR");
        snprintf(m->path, sizeof m->path, "%s/paralab-lab05-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(m->path);
        if (fd < 0) pl_usage_error("cannot create a temporary file for the tiny model in %s", dir ? dir : "/tmp");
        close(fd);
        m->tmp = true;
        char err[512];
        if (ds_tiny_llama_write(m->path, seed, &TINY, false, err, sizeof err)) {
            lab5_model_forget(m);
            pl_usage_error("%s", err);
        }
    } else {
        pl_usage_error("--model: '%s' is not tiny or smollm2 (or give --gguf FILE)", f->model);
    }
}

void lab5_model_open(lab5_model *m, uint64_t seed) {
    char err[512];
    memset(m, 0, sizeof *m);
    resolve_path(m, seed);
    m->file = ds_gguf_open(m->path, err, sizeof err);
    ds_llama_config lc;
    if (!m->file || ds_llama_config_read(m->file, &lc, err, sizeof err)) {
        lab5_model_forget(m);
        pl_usage_error("%s", err);
    }
    m->cfg = (llm_config){.n_layer = lc.n_layer, .n_embd = lc.n_embd, .n_ff = lc.n_ff, .n_head = lc.n_head,
                          .n_head_kv = lc.n_head_kv, .head_dim = lc.head_dim, .n_vocab = lc.n_vocab,
                          .n_ctx = lc.n_ctx, .rope_base = lc.rope_freq_base, .rms_eps = lc.rms_eps,
                          .tied_output = lc.tied_output};
    if (llm_config_check(&m->cfg, err, sizeof err)) pl_usage_error("%s: %s", m->path, err);
    m->bpe = ds_bpe_from_gguf(m->file, err, sizeof err);
    if (!m->bpe) pl_usage_error("%s", err);
    const ds_gguf_kv *name = ds_gguf_find_key(m->file, "general.name");
    const llm_config *c = &m->cfg;
    snprintf(m->desc, sizeof m->desc, "%.*s: %d layers, C %d, F %d, %d heads (%d KV) of %d, vocab %d%s",
             name && name->type == DS_GGUF_STRING ? (int)name->count : 5,
             name && name->type == DS_GGUF_STRING ? (const char *)name->data : "llama", c->n_layer, c->n_embd,
             c->n_ff, c->n_head, c->n_head_kv, c->head_dim, c->n_vocab, c->tied_output ? ", tied output" : "");
}

void lab5_model_close(lab5_model *m) {
    lab5_model_forget(m);
    ds_bpe_free(m->bpe);
    ds_gguf_close(m->file);
    m->bpe = NULL, m->file = NULL;
}

const ds_gguf_tensor *lab5_tensor(const lab5_model *m, llm_tensor which, int layer, char *name, size_t len,
                                  char *why, size_t whylen) {
    if ((int)which < 0 || which >= LLM_N_TENSORS) {
        snprintf(name, len, "?");
        snprintf(why, whylen, "no tensor number %d", (int)which);
        return NULL;
    }
    bool per_layer = which < LLM_N_LAYER_TENSORS;
    llm_tensor_gguf_name(which == LLM_OUTPUT && m->cfg.tied_output ? LLM_TOKEN_EMBD : which, layer, name, len);
    if (per_layer ? layer < 0 || layer >= m->cfg.n_layer : layer != -1) {
        snprintf(why, whylen, "layer %d: layer tensors take 0 .. %d, the global ones -1", layer, m->cfg.n_layer - 1);
        return NULL;
    }
    const ds_gguf_tensor *t = ds_gguf_find_tensor(m->file, name);
    PL_CHECK(t != NULL, "the model lost a tensor");
    return t;
}

int lab5_tensor_type(const lab5_model *m, llm_tensor which, int layer) {
    char name[96], why[160];
    const ds_gguf_tensor *t = lab5_tensor(m, which, layer, name, sizeof name, why, sizeof why);
    if (!t) return -1;
    bool quant = t->type == DS_GGML_Q4_0 || t->type == DS_GGML_Q4_1 || t->type == DS_GGML_Q8_0;
    return quant && t->nrows > 1 ? (int)t->type : LLM_F32;
}

/* ---- the tokenizer ------------------------------------------------------------------------ */

int *lab5_tokens(const lab5_model *m, const char *text, bool chat, int *n) {
    char buf[4096], err[256];
    const char *src = text;
    if (chat && ds_bpe_token_id(m->bpe, "<|im_start|>") >= 0) { /* SmolLM2-Instruct's template */
        snprintf(buf, sizeof buf, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", text);
        src = buf;
    }
    int64_t need = ds_bpe_encode(m->bpe, src, strlen(src), chat ? DS_BPE_SPECIAL : 0, NULL, 0, err, sizeof err);
    if (need < 0) pl_usage_error("tokenizer: %s", err);
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    int *out = malloc(((size_t)need + 1) * sizeof *out);
    PL_CHECK(ids && out, "out of host memory");
    ds_bpe_encode(m->bpe, src, strlen(src), chat ? DS_BPE_SPECIAL : 0, ids, need, err, sizeof err);
    for (int64_t i = 0; i < need; i++) out[i] = ids[i];
    free(ids);
    *n = (int)need;
    return out;
}

void lab5_text(const lab5_model *m, const int *ids, int n, char *out, size_t cap) {
    int32_t *v = malloc(((size_t)n + 1) * sizeof *v);
    PL_CHECK(v != NULL, "out of host memory");
    for (int i = 0; i < n; i++) v[i] = ids[i];
    char err[128];
    if (ds_bpe_decode(m->bpe, v, n, out, cap, err, sizeof err) < 0) snprintf(out, cap, "(%s)", err);
    free(v);
}
