/* llama_gguf.c - llm_load_gguf: a GGUF llama's config and every tensor, uploaded to the
 * device as the file stores it (Q4_0, Q4_1, Q8_0 blocks: kern_qmatmul multiplies them) or
 * dequantised to float32 on the host by datasets/ds_gguf (F16, F32; every tensor for
 * llm_load_gguf_f32). Kept apart from llama.c so that programs that only use the forward
 * do not link the GGUF reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_gguf.h" // defines: ds_gguf_open, ds_llama_config_read, ds_gguf_dequantize
#include "llama.h"

/* Tensor `which` of `layer` into a new device matrix *out, in its stored type when the
 * kernels take it and f32 is false, else dequantised; *host is a reused host buffer of *cap
 * floats. 0, or -1 with err set. */
static int load_tensor(const ds_gguf *g, const llm_config *cfg, llm_tensor which, int layer, bool f32, float **host,
                       size_t *cap, llm_mat *out, char *err, size_t errlen) {
    char name[96];
    llm_tensor_gguf_name(which, layer, name, sizeof name);
    const ds_gguf_tensor *t = ds_gguf_find_tensor(g, name);
    int64_t rows, cols;
    llm_tensor_shape(cfg, which, &rows, &cols);
    if (!t) {
        snprintf(err, errlen, "%s: tensor '%s' is missing", ds_gguf_name(g), name);
        return -1;
    }
    /* ne = {in, out}: ne[0] is a row of our [out, in] tensor */
    if (t->ne[0] != cols || t->nrows != rows) {
        snprintf(err, errlen, "%s: tensor '%s' has ne = {%lld, %lld}, the config needs {%lld, %lld}", ds_gguf_name(g),
                 name, (long long)t->ne[0], (long long)t->nrows, (long long)cols, (long long)rows);
        return -1;
    }
    size_t n = (size_t)(rows * cols);
    bool keep = !f32 && (t->type == DS_GGML_Q4_0 || t->type == DS_GGML_Q4_1 || t->type == DS_GGML_Q8_0);
    if (keep) { /* the blocks as they are: the file's rows are ours */
        out->type = (int)t->type;
        out->data = pl_malloc(t->nbytes);
        pl_upload(out->data, t->data, t->nbytes);
        return 0;
    }
    if (n > *cap) {
        float *bigger = realloc(*host, n * sizeof(float));
        if (!bigger) {
            snprintf(err, errlen, "%s: out of host memory for tensor '%s'", ds_gguf_name(g), name);
            return -1;
        }
        *host = bigger;
        *cap = n;
    }
    if (ds_gguf_dequantize(t, 0, rows, *host, err, errlen)) return -1;
    out->type = LLM_F32;
    out->data = pl_malloc_floats(n);
    pl_upload(out->data, *host, n * sizeof(float));
    return 0;
}

/* The features this forward does not implement, refused rather than run wrongly. */
static int check_supported(const ds_gguf *g, int head_dim, char *err, size_t errlen) {
    int64_t rope_dims = head_dim;
    if (ds_gguf_find_key(g, "llama.rope.dimension_count") &&
        !ds_gguf_get_int(g, "llama.rope.dimension_count", 0, 1 << 20, &rope_dims, err, errlen))
        return -1;
    if (rope_dims != head_dim) {
        snprintf(err, errlen, "%s: rope on %lld of %d dimensions per head is not supported (only all of them)",
                 ds_gguf_name(g), (long long)rope_dims, head_dim);
        return -1;
    }
    if (ds_gguf_find_tensor(g, "rope_freqs.weight")) {
        snprintf(err, errlen, "%s: rope frequency factors (rope_freqs.weight, llama 3.1 style) are not supported",
                 ds_gguf_name(g));
        return -1;
    }
    return 0;
}

int llm_load_gguf_part(const char *path, llm_config *cfg, llm_weights *w, int layer0, int n_layers, bool embd,
                       bool head, bool f32, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    ds_gguf *g = ds_gguf_open(path, err, errlen);
    if (!g) return -1;
    ds_llama_config lc;
    if (ds_llama_config_read(g, &lc, err, errlen) || check_supported(g, lc.head_dim, err, errlen)) {
        ds_gguf_close(g);
        return -1;
    }
    llm_config c = {
        .n_layer = lc.n_layer, .n_embd = lc.n_embd, .n_ff = lc.n_ff, .n_head = lc.n_head,
        .n_head_kv = lc.n_head_kv, .head_dim = lc.head_dim, .n_vocab = lc.n_vocab, .n_ctx = lc.n_ctx,
        .rope_base = lc.rope_freq_base, .rms_eps = lc.rms_eps, .tied_output = lc.tied_output,
    };
    if (llm_config_check(&c, err, errlen)) {
        ds_gguf_close(g);
        return -1;
    }
    if (n_layers < 0) n_layers = c.n_layer - layer0;
    if (layer0 < 0 || n_layers < 0 || layer0 + n_layers > c.n_layer) {
        snprintf(err, errlen, "%s: layers %d .. %d asked for, the model has layers 0 .. %d", path, layer0,
                 layer0 + n_layers - 1, c.n_layer - 1);
        ds_gguf_close(g);
        return -1;
    }
    float *host = NULL;
    size_t cap = 0;
    int rc = 0;
    w->layers = calloc((size_t)c.n_layer, sizeof *w->layers);
    if (!w->layers) {
        snprintf(err, errlen, "%s: out of host memory", path);
        rc = -1;
    }
    for (int l = layer0; l < layer0 + n_layers && !rc; l++) {
        llm_layer_weights *lw = &w->layers[l];
        llm_mat norm[2] = {{NULL, LLM_F32}, {NULL, LLM_F32}};
        llm_mat *slot[LLM_N_LAYER_TENSORS] = {&norm[0], &lw->wq,     &lw->wk,   &lw->wv,    &lw->wo,
                                              &norm[1], &lw->w_gate, &lw->w_up, &lw->w_down};
        for (int t = 0; t < LLM_N_LAYER_TENSORS && !rc; t++)
            rc = load_tensor(g, &c, (llm_tensor)t, l, f32 || t == LLM_ATTN_NORM || t == LLM_FFN_NORM, &host, &cap,
                             slot[t], err, errlen);
        lw->attn_norm = norm[0].data, lw->ffn_norm = norm[1].data;
    }
    if (!rc && embd) rc = load_tensor(g, &c, LLM_TOKEN_EMBD, -1, f32, &host, &cap, &w->token_embd, err, errlen);
    llm_mat onorm = {NULL, LLM_F32};
    if (!rc && head) rc = load_tensor(g, &c, LLM_OUTPUT_NORM, -1, true, &host, &cap, &onorm, err, errlen);
    w->output_norm = onorm.data;
    if (!rc && head) {
        /* tied: the head's matrix is the embedding, loaded once when the rank has both */
        if (c.tied_output && embd) w->output = w->token_embd;
        else if (c.tied_output) rc = load_tensor(g, &c, LLM_TOKEN_EMBD, -1, f32, &host, &cap, &w->output, err, errlen);
        else rc = load_tensor(g, &c, LLM_OUTPUT, -1, f32, &host, &cap, &w->output, err, errlen);
    }
    free(host);
    ds_gguf_close(g);
    if (rc) {
        llm_weights_free(w, &c);
        return -1;
    }
    *cfg = c;
    return 0;
}

int llm_load_gguf(const char *path, llm_config *cfg, llm_weights *w, char *err, size_t errlen) {
    return llm_load_gguf_part(path, cfg, w, 0, -1, true, true, false, err, errlen);
}

int llm_load_gguf_f32(const char *path, llm_config *cfg, llm_weights *w, char *err, size_t errlen) {
    return llm_load_gguf_part(path, cfg, w, 0, -1, true, true, true, err, errlen);
}
