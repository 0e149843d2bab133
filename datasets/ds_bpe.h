/* ds_bpe.h - GPT-2 style byte-level BPE, built from a GGUF file's tokenizer.ggml.* metadata.
 *
 * Encoding: special tokens (control and user-defined ones, tokenizer.ggml.token_type 3 and
 * 4) are cut out of the text where they occur literally; the rest is split into
 * pre-tokens (pre "smollm": every digit alone, then GPT-2's rule - contractions, letter
 * runs, number runs, punctuation runs, each with at most one leading space, and whitespace
 * runs); each pre-token's bytes become characters through GPT-2's byte-to-unicode map and are
 * merged pairwise, lowest tokenizer.ggml.merges rank first, into token ids.
 * Decoding maps each token back to its bytes; a control token decodes to its own text
 * (e.g. "<|im_end|>"). docs/gguf.md says where this may differ from other tokenizers.
 * Depends on libc and ds_gguf only (the libFuzzer target links it without MPI).
 */
#ifndef DS_BPE_H
#define DS_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ds_gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ds_bpe ds_bpe;

typedef enum {
    DS_BPE_PRE_GPT2,   /* GPT-2's split (tokenizer.ggml.pre "gpt2", or absent)           */
    DS_BPE_PRE_SMOLLM  /* digits one by one, then GPT-2's split ("smollm", "starcoder", ...) */
} ds_bpe_pre;

/* Reads tokenizer.ggml.model ("gpt2" required), .pre, .tokens, .token_type, .merges and the
 * bos/eos ids, and copies what it needs (the ds_gguf may be closed afterwards).
 * NULL with a one-line "<file>: <problem>" in err. */
ds_bpe *ds_bpe_from_gguf(const ds_gguf *g, char *err, size_t errlen);
void ds_bpe_free(ds_bpe *b);

int32_t ds_bpe_n_vocab(const ds_bpe *b);
int32_t ds_bpe_bos(const ds_bpe *b); /* -1 when the file names none */
int32_t ds_bpe_eos(const ds_bpe *b);
ds_bpe_pre ds_bpe_pre_kind(const ds_bpe *b);
bool ds_bpe_is_control(const ds_bpe *b, int32_t id);
/* Does this byte have a token of its own? Encoding drops a byte that has none before merging,
 * as HuggingFace tokenizers does (SmolLM2 lacks 21, e.g. 0x04, 0x1d, 0xf1), so
 * decode(encode(text)) is the text without such bytes. */
bool ds_bpe_has_byte(const ds_bpe *b, uint8_t byte);
/* The id of the token spelled exactly `spelling` (byte-level form: "Ġthe" for " the";
 * control tokens as written, "<|im_start|>"), or -1. */
int32_t ds_bpe_token_id(const ds_bpe *b, const char *spelling);
/* The bytes token id decodes to (not NUL-terminated), or NULL for an id out of range. */
const char *ds_bpe_token_bytes(const ds_bpe *b, int32_t id, size_t *len);

enum {
    DS_BPE_ADD_BOS = 1, /* start with the BOS id (when the file has one)                 */
    DS_BPE_SPECIAL = 2  /* match special tokens in the text; without it they are plain text */
};
/* Encode text[0 .. len) into ids[0 .. cap). Returns how many ids the text takes (more than
 * cap: only cap were written, call again with more room), or -1 with err set (out of memory). */
int64_t ds_bpe_encode(const ds_bpe *b, const char *text, size_t len, unsigned flags, int32_t *ids, int64_t cap,
                      char *err, size_t errlen);
/* Decode ids into out[0 .. cap) (NUL-terminated when there is room). Returns the byte count
 * of the whole text (more than cap - 1: it was cut), or -1 with err set (an id out of range). */
int64_t ds_bpe_decode(const ds_bpe *b, const int32_t *ids, int64_t n, char *out, size_t cap, char *err,
                      size_t errlen);

/* The pre-tokeniser alone: pieces of text[0 .. len) as end offsets (pieces are contiguous and
 * cover the text). Returns the number of pieces; at most cap ends are written. */
size_t ds_bpe_pretokenize(ds_bpe_pre pre, const char *text, size_t len, size_t *ends, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
