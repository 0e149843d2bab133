/* fuzz_gguf.c - libFuzzer target for the GGUF reader and the tokenizer: any byte string must
 * either open, with every tensor inside the buffer and dequantisable rows that decode, or fail
 * with one line; a tokenizer built from whatever metadata opened must round-trip text.
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Idatasets tests/datasets/fuzz_gguf.c \
 *     datasets/ds_gguf.c datasets/ds_bpe.c -o fuzz_gguf
 * Seed corpus: `test_gguf --write-seeds DIR` (tests/datasets/test_gguf.sh makes one). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ds_bpe.h"
#include "ds_gguf.h"

#define MAX_FLOATS (1 << 16) /* dequantised per tensor, so a large claimed tensor stays cheap */

static void one_line(const char *err) {
    if (err[0] == 0 || strchr(err, '\n')) abort(); /* every failure explains itself on one line */
}

static void tokenizer(const ds_gguf *g) {
    char err[512] = "";
    ds_bpe *b = ds_bpe_from_gguf(g, err, sizeof err);
    if (!b) {
        one_line(err);
        return;
    }
    static const char text[] = "Hello <|im_start|>world's 123  caf\xc3\xa9 \xf0\x9f\x8e\x89\n\t\xff<|im_end|>";
    int32_t ids[256];
    char back[512];
    for (unsigned flags = 0; flags < 4; flags++) {
        int64_t n = ds_bpe_encode(b, text, sizeof text - 1, flags, ids, 256, err, sizeof err);
        if (n < 0 || n > 256) abort(); /* at most one id per byte, plus BOS */
        int64_t m = ds_bpe_decode(b, ids, n, back, sizeof back, err, sizeof err);
        if (m < 0) abort(); /* every id encode gives is in range */
        if (flags & DS_BPE_SPECIAL) continue;
        /* without special tokens, decoding gives the text minus the bytes that have no token */
        char want[sizeof text];
        size_t k = 0;
        for (size_t i = 0; i + 1 < sizeof text; i++)
            if (ds_bpe_has_byte(b, (uint8_t)text[i])) want[k++] = text[i];
        if (flags & DS_BPE_ADD_BOS && ds_bpe_bos(b) >= 0) {
            size_t bl;
            const char *bos = ds_bpe_token_bytes(b, ds_bpe_bos(b), &bl);
            if (m < (int64_t)bl || memcmp(back, bos, bl) != 0) abort();
            memmove(back, back + bl, (size_t)m - bl);
            m -= (int64_t)bl;
        }
        if (m != (int64_t)k || memcmp(back, want, k) != 0) abort();
    }
    ds_bpe_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private copy of exactly `size` bytes: ASan then flags any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    char err[512] = "";
    ds_gguf *g = ds_gguf_open_memory(buf, size, "fuzz.gguf", err, sizeof err);
    if (!g) {
        one_line(err);
        free(buf);
        return 0;
    }
    float *out = malloc(MAX_FLOATS * sizeof *out);
    for (int64_t i = 0; out && i < ds_gguf_n_tensors(g); i++) {
        const ds_gguf_tensor *t = ds_gguf_tensor_at(g, i);
        if (t->data < buf || t->data + t->nbytes > buf + size) abort();
        if (ds_gguf_find_tensor(g, t->name) != t) abort(); /* names are unique */
        if (t->ne[0] > MAX_FLOATS) continue;
        int64_t rows = MAX_FLOATS / t->ne[0];
        if (rows > t->nrows) rows = t->nrows;
        int64_t row0 = t->nrows - rows; /* the last rows: the end of the tensor's bytes */
        int rc = ds_gguf_dequantize(t, row0, rows, out, err, sizeof err);
        if (rc != 0) one_line(err);
        if (rc != 0 && ds_ggml_can_dequantize(t->type)) abort();
    }
    free(out);
    ds_llama_config cfg;
    if (ds_llama_config_read(g, &cfg, err, sizeof err) != 0) one_line(err);
    tokenizer(g);
    ds_gguf_close(g);
    free(buf);
    return 0;
}
