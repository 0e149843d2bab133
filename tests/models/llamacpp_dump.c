/* llamacpp_dump.c - the helper of tests/models/check_llamacpp.sh (not a test by itself): the
 * token ids of a prompt (the kit's tokenizer, datasets/ds_bpe.h) and the logits of every
 * position from the kit's single-device forward (models/llama.h) on a GGUF file, written
 * raw for the comparison with llama.cpp:
 *     int32 n, int32 n_vocab, int32 ids[n], float32 logits[n][n_vocab]   (little-endian)
 *
 *   mpirun -np 1 llamacpp_dump MODEL.gguf "PROMPT" OUT.bin
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_bpe.h"  // defines: ds_bpe_from_gguf, ds_bpe_encode
#include "ds_gguf.h" // defines: ds_gguf_open
#include "llama.h"   // defines: llm_load_gguf, llm_forward
#include "pl.h"

static int fail(const char *what, const char *why) {
    fprintf(stderr, "llamacpp_dump: %s: %s\n", what, why);
    pl_finalize();
    return 1;
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (argc != 4) return fail("usage", "llamacpp_dump MODEL.gguf PROMPT OUT.bin");
    char err[512];
    ds_gguf *g = ds_gguf_open(argv[1], err, sizeof err);
    ds_bpe *bpe = g ? ds_bpe_from_gguf(g, err, sizeof err) : NULL;
    if (!bpe) return fail(argv[1], err);
    ds_gguf_close(g);
    int32_t ids[1024];
    int64_t n = ds_bpe_encode(bpe, argv[2], strlen(argv[2]), 0, ids, 1024, err, sizeof err);
    ds_bpe_free(bpe);
    if (n < 1 || n > 1024) return fail("prompt", n < 0 ? err : "1 to 1024 tokens please");

    llm_config c;
    llm_weights w;
    if (llm_load_gguf(argv[1], &c, &w, err, sizeof err)) return fail(argv[1], err);
    llm_kv_cache kv;
    llm_workspace ws;
    llm_kv_cache_init(&kv, &c, NULL, 1, (int)n, 0, c.n_layer);
    llm_workspace_init(&ws, &c, NULL, (int)n);
    int *tok = malloc((size_t)n * sizeof(int)), *seq = calloc((size_t)n, sizeof(int)), *pos = malloc((size_t)n * sizeof(int));
    float *host = malloc((size_t)n * c.n_vocab * sizeof(float));
    float *logits = pl_malloc_floats((size_t)n * c.n_vocab);
    PL_CHECK(tok && seq && pos && host, "out of host memory");
    for (int64_t i = 0; i < n; i++) tok[i] = ids[i], pos[i] = (int)i;
    int rows = llm_forward(&c, &w, &kv, &ws, tok, seq, pos, (int)n, logits, LLM_LOGITS_ALL, NULL);
    if (rows != n) return fail("llm_forward", ws.err);
    pl_download(host, logits, (size_t)n * c.n_vocab * sizeof(float));

    FILE *f = fopen(argv[3], "wb");
    int32_t head[2] = {(int32_t)n, c.n_vocab};
    int ok = f && fwrite(head, sizeof head, 1, f) == 1 && fwrite(ids, sizeof(int32_t), (size_t)n, f) == (size_t)n &&
             fwrite(host, sizeof(float), (size_t)n * c.n_vocab, f) == (size_t)n * c.n_vocab;
    if (f && fclose(f)) ok = 0;
    pl_free(logits);
    free(tok), free(seq), free(pos), free(host);
    llm_workspace_free(&ws);
    llm_kv_cache_free(&kv);
    llm_weights_free(&w, &c);
    if (!ok) return fail(argv[3], "cannot write it");
    pl_finalize();
    return 0;
}
