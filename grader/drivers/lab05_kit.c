/* lab05_kit.c - the model Lab 5's driver serves, and ls_load, the student's only way to
 * its weights.
 *
 * --model smollm2 reads SmolLM2-135M-Instruct.Q4_1.gguf ($GGUF, else datasets/cache/ where
 * scripts/fetch-model.sh puts it; --gguf FILE wins); --model tiny writes the project's tiny
 * llama (datasets/ds_gguf_write.c) to a temporary file of each rank's own, maps it and
 * removes it once the reference forward has read it. Either way every rank maps the file
 * and ls_load copies just the block a rank asks for, in its stored blocks or dequantised,
 * counting the bytes: what a rank holds is what it loaded.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> // defines: access, close, unlink

#include "ds_gguf.h" // defines: ds_gguf_open, ds_llama_config_read, ds_gguf_dequantize, ds_tiny_llama_write
#include "lab05.h"

#define SMOLLM2_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

llm_config g_cfg;
ds_bpe *g_bpe;
char g_model_desc[160];
static ds_gguf *g_file;
static char g_path[4096];
static bool g_tmp;
static uint64_t g_loaded;

/* The tiny model of the self-tests: SmolLM2's proportions (9 query heads over 3 KV heads,
 * F = 8/3 C, a tied output) at 1/2 its width and 1/5 its depth, so that the row split's
 * rounding to 128 rows leaves ranks with 0 rows as it does on SmolLM2's 192-row K and V. */
static const ds_llama_config TINY = {.n_layer = 6, .n_embd = 288, .n_ff = 768, .n_head = 9, .n_head_kv = 3,
                                     .n_ctx = 256, .rope_freq_base = 10000.0f, .rms_eps = 1e-5f};

uint64_t kit_loaded(void) { return g_loaded; }
void kit_reset_loaded(void) { g_loaded = 0; }
const char *kit_path(void) { return g_path; }
bool kit_temporary(void) { return g_tmp; }

void kit_forget_path(void) {
    if (g_tmp) unlink(g_path); /* the mapping stays valid */
    g_tmp = false;
}

/* Every rank decides alike (same flags, same file), so a usage error is safe here. */
static void resolve_path(void) {
    if (g_gguf && *g_gguf) {
        snprintf(g_path, sizeof g_path, "%s", g_gguf);
    } else if (!strcmp(g_model, "smollm2")) {
        const char *env = getenv("GGUF");
        snprintf(g_path, sizeof g_path, "%s", env && *env ? env : "datasets/cache/" SMOLLM2_FILE);
        if (access(g_path, R_OK) != 0)
            pl_usage_error("%s: SmolLM2 is not there: run scripts/fetch-model.sh (or give GGUF=/path/to/%s), "
                           "or --model tiny", g_path, SMOLLM2_FILE);
    } else if (!strcmp(g_model, "tiny")) {
        const char *dir = getenv("TMPDIR");
        snprintf(g_path, sizeof g_path, "%s/paralab-lab05-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(g_path);
        if (fd < 0) pl_usage_error("cannot create a temporary file for the tiny model in %s", dir ? dir : "/tmp");
        close(fd);
        g_tmp = true;
        char err[512];
        if (ds_tiny_llama_write(g_path, pl_info()->seed, &TINY, false, err, sizeof err)) {
            kit_forget_path();
            pl_usage_error("%s", err);
        }
    } else {
        pl_usage_error("--model: '%s' is not tiny or smollm2 (or give --gguf FILE)", g_model);
    }
}

void kit_open(void) {
    char err[512];
    resolve_path();
    g_file = ds_gguf_open(g_path, err, sizeof err);
    ds_llama_config lc;
    if (!g_file || ds_llama_config_read(g_file, &lc, err, sizeof err)) {
        kit_forget_path();
        pl_usage_error("%s", err);
    }
    g_cfg = (llm_config){.n_layer = lc.n_layer, .n_embd = lc.n_embd, .n_ff = lc.n_ff, .n_head = lc.n_head,
                         .n_head_kv = lc.n_head_kv, .head_dim = lc.head_dim, .n_vocab = lc.n_vocab,
                         .n_ctx = lc.n_ctx, .rope_base = lc.rope_freq_base, .rms_eps = lc.rms_eps,
                         .tied_output = lc.tied_output};
    if (llm_config_check(&g_cfg, err, sizeof err)) pl_usage_error("%s: %s", g_path, err);
    g_bpe = ds_bpe_from_gguf(g_file, err, sizeof err);
    if (!g_bpe) pl_usage_error("%s", err);
    const ds_gguf_kv *name = ds_gguf_find_key(g_file, "general.name");
    snprintf(g_model_desc, sizeof g_model_desc, "%.*s: %d layers, C %d, F %d, %d heads (%d KV) of %d, vocab %d%s",
             name && name->type == DS_GGUF_STRING ? (int)name->count : 5,
             name && name->type == DS_GGUF_STRING ? (const char *)name->data : "llama", g_cfg.n_layer, g_cfg.n_embd,
             g_cfg.n_ff, g_cfg.n_head, g_cfg.n_head_kv, g_cfg.head_dim, g_cfg.n_vocab,
             g_cfg.tied_output ? ", tied output" : "");
}

void kit_close(void) {
    kit_forget_path();
    ds_bpe_free(g_bpe);
    ds_gguf_close(g_file);
    g_bpe = NULL, g_file = NULL;
}

/* ---- ls_load ------------------------------------------------------------------------------ */

static int refuse(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(const char *name, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] ls_load(%s): %s\n", g_me, name, why);
    return -1;
}

/* The file's tensor behind `which` of `layer` (the tied output reads token_embd), or NULL
 * with a line on stderr (and *name filled) when there is no such tensor. */
static const ds_gguf_tensor *kit_tensor(llm_tensor which, int layer, char *name, size_t len, bool say) {
    if ((int)which < 0 || which >= LLM_N_TENSORS) {
        snprintf(name, len, "?");
        if (say) refuse(name, "no tensor number %d", (int)which);
        return NULL;
    }
    bool per_layer = which < LLM_N_LAYER_TENSORS;
    llm_tensor_gguf_name(which == LLM_OUTPUT && g_cfg.tied_output ? LLM_TOKEN_EMBD : which, layer, name, len);
    if (per_layer ? layer < 0 || layer >= g_cfg.n_layer : layer != -1) {
        if (say) refuse(name, "layer %d: layer tensors take 0 .. %d, the global ones -1", layer, g_cfg.n_layer - 1);
        return NULL;
    }
    const ds_gguf_tensor *t = ds_gguf_find_tensor(g_file, name);
    PL_CHECK(t != NULL, "the model lost a tensor");
    return t;
}

int kit_type(llm_tensor which, int layer) {
    char name[96];
    const ds_gguf_tensor *t = kit_tensor(which, layer, name, sizeof name, false);
    if (!t) return -1;
    bool quant = t->type == DS_GGML_Q4_0 || t->type == DS_GGML_Q4_1 || t->type == DS_GGML_Q8_0;
    return quant && t->nrows > 1 ? (int)t->type : LLM_F32;
}

int ls_type(llm_tensor which, int layer) { return kit_type(which, layer); }

int ls_load(llm_tensor which, int layer, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols, int type,
            void *dst) {
    char name[96];
    const ds_gguf_tensor *t = kit_tensor(which, layer, name, sizeof name, true);
    if (!t) return -1;
    int64_t rows, cols;
    llm_tensor_shape(&g_cfg, which, &rows, &cols);
    if (row0 < 0 || nrows < 0 || row0 > rows || nrows > rows - row0 || col0 < 0 || ncols < 0 || col0 > cols ||
        ncols > cols - col0)
        return refuse(name, "rows %lld + %lld, columns %lld + %lld: outside the tensor's %lld x %lld", (long long)row0,
                      (long long)nrows, (long long)col0, (long long)ncols, (long long)rows, (long long)cols);
    int held = kit_type(which, layer);
    if (type != LLM_F32 && type != held)
        return refuse(name, "type %s: the tensor is held as %s (or ask for %s, dequantised)", llm_type_name(type),
                      llm_type_name(held), llm_type_name(LLM_F32));
    if (type != LLM_F32 && (col0 % LLM_QK || ncols % LLM_QK))
        return refuse(name, "columns %lld + %lld cut a %s block of %d weights: load that block as %s", (long long)col0,
                      (long long)ncols, llm_type_name(type), LLM_QK, llm_type_name(LLM_F32));
    if (nrows == 0 || ncols == 0) return 0;
    if (!dst) return refuse(name, "a NULL destination for %lld x %lld weights", (long long)nrows, (long long)ncols);
    size_t bytes = llm_mat_bytes(type, nrows, ncols);
    if (type != LLM_F32) { /* whole blocks: each row's stretch of them, packed */
        size_t skip = llm_mat_bytes(type, 1, col0), row = llm_mat_bytes(type, 1, ncols);
        uint8_t *h = malloc(bytes);
        PL_CHECK(h != NULL, "out of host memory");
        for (int64_t r = 0; r < nrows; r++) memcpy(h + r * row, t->data + (row0 + r) * t->row_bytes + skip, row);
        pl_upload(dst, h, bytes);
        free(h);
        g_loaded += bytes;
        return 0;
    }
    float *full = malloc((size_t)(nrows * cols) * sizeof(float));
    PL_CHECK(full != NULL, "out of host memory");
    char err[256];
    if (ds_gguf_dequantize(t, row0, nrows, full, err, sizeof err)) {
        free(full);
        fprintf(stderr, "[rank %d] ls_load(%s): %s\n", g_me, name, err);
        return -1;
    }
    if (ncols < cols) /* a block of columns: pack it densely, in place (each row moves left) */
        for (int64_t r = 0; r < nrows; r++)
            memmove(full + r * ncols, full + r * cols + col0, (size_t)ncols * sizeof(float));
    pl_upload(dst, full, bytes);
    free(full);
    g_loaded += bytes;
    return 0;
}

/* ---- the tokenizer ------------------------------------------------------------------------ */

int *kit_tokens(const char *text, bool chat, int *n) {
    char buf[4096], err[256];
    const char *src = text;
    if (chat && ds_bpe_token_id(g_bpe, "<|im_start|>") >= 0) { /* SmolLM2-Instruct's template */
        snprintf(buf, sizeof buf, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", text);
        src = buf;
    }
    int64_t need = ds_bpe_encode(g_bpe, src, strlen(src), chat ? DS_BPE_SPECIAL : 0, NULL, 0, err, sizeof err);
    if (need < 0) pl_usage_error("tokenizer: %s", err);
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    int *out = malloc(((size_t)need + 1) * sizeof *out);
    PL_CHECK(ids && out, "out of host memory");
    ds_bpe_encode(g_bpe, src, strlen(src), chat ? DS_BPE_SPECIAL : 0, ids, need, err, sizeof err);
    for (int64_t i = 0; i < need; i++) out[i] = ids[i];
    free(ids);
    *n = (int)need;
    return out;
}

void kit_text(const int *ids, int n, char *out, size_t cap) {
    int32_t *v = malloc(((size_t)n + 1) * sizeof *v);
    PL_CHECK(v != NULL, "out of host memory");
    for (int i = 0; i < n; i++) v[i] = ids[i];
    char err[128];
    if (ds_bpe_decode(g_bpe, v, n, out, cap, err, sizeof err) < 0) snprintf(out, cap, "(%s)", err);
    free(v);
}
