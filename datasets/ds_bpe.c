/* ds_bpe.c - byte-level BPE from GGUF metadata: vocabulary and merges in hash tables, a
 * hand-written GPT-2 pre-tokeniser (no regex library), encode and decode. The Unicode
 * letter/number tables the pre-tokeniser needs are at the end of the file. */
#include "ds_bpe.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CL_OTHER, CL_LETTER, CL_NUMBER, CL_SPACE };
static int cp_class(uint32_t cp); /* the Unicode tables, at the end */

#define INVALID_CP 0xFFFFFFFFu /* a byte that starts no valid UTF-8 sequence */

/* ==== UTF-8 and GPT-2's byte map ============================================================= */

/* The code point at s[0 .. n) (n >= 1) and its length; an invalid or truncated sequence is
 * one byte long and INVALID_CP, so any byte string walks through. */
static uint32_t utf8_next(const uint8_t *s, size_t n, size_t *len) {
    uint8_t c = s[0];
    *len = 1;
    if (c < 0x80) return c;
    int need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
    if (need < 0 || (size_t)need >= n) return INVALID_CP;
    /* the second byte's range rules out overlong forms, surrogates and code points > 0x10FFFF */
    uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi) return INVALID_CP;
    uint32_t cp = c & (0x3F >> need);
    for (int k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80) return INVALID_CP;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    *len = (size_t)need + 1;
    return cp;
}

static size_t utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), 2;
    out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 63)), out[2] = (char)(0x80 | (cp & 63));
    return 3; /* the byte map stays below 0x10000 */
}

/* GPT-2 spells every byte as a printable character: the printable Latin-1 bytes (33-126,
 * 161-172, 174-255) as themselves, the other 68 as 256, 257, ... in byte order. */
static bool byte_is_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }
#define BYTE_CHARS 324 /* 256 + 68 */

static void byte_maps(uint32_t to_char[256], int16_t to_byte[BYTE_CHARS]) {
    int extra = 0;
    for (int c = 0; c < BYTE_CHARS; c++) to_byte[c] = -1;
    for (int b = 0; b < 256; b++) {
        to_char[b] = byte_is_printable(b) ? (uint32_t)b : (uint32_t)(256 + extra++);
        to_byte[to_char[b]] = (int16_t)b;
    }
}

/* ==== the tokenizer ========================================================================== */

typedef struct {
    uint64_t pair; /* left id << 32 | right id; UINT64_MAX = empty */
    int32_t rank, result;
} merge_slot;

typedef struct {
    uint32_t len;
    int32_t id;
} special_tok;

struct ds_bpe {
    int32_t n_vocab;
    char *spell, *dec;              /* token spellings, and the bytes each decodes to       */
    uint64_t *spell_off, *dec_off;
    uint32_t *spell_len, *dec_len;
    uint8_t *special;               /* 1 control (token_type 3), 2 user-defined (4), else 0 */
    int32_t *vocab_slots;           /* spelling -> id + 1, open addressing                  */
    size_t vocab_cap;
    merge_slot *merges;
    size_t merge_cap;
    special_tok *specials;          /* matched literally, longest first                     */
    int32_t n_specials;
    uint8_t special_first[256];     /* does some special token start with this byte?        */
    int32_t byte_tok[256];          /* the token of each single byte, or -1                 */
    int32_t bos, eos;
    ds_bpe_pre pre;
    char *name;                     /* the file's name, for messages                        */
};

static bool bfail(char *err, size_t errlen, const char *name, const char *fmt, ...) {
    if (!err || !errlen) return false;
    int n = snprintf(err, errlen, "%s: ", name);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++) /* token text may hold anything: keep the message on one line */
        if (*p == '\n' || *p == '\r') *p = ' ';
    return false;
}

static uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t mix_pair(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int32_t vocab_find(const ds_bpe *b, const char *s, size_t n) {
    size_t i = (size_t)fnv1a(s, n) & (b->vocab_cap - 1);
    for (; b->vocab_slots[i]; i = (i + 1) & (b->vocab_cap - 1)) {
        int32_t id = b->vocab_slots[i] - 1;
        if (b->spell_len[id] == n && memcmp(b->spell + b->spell_off[id], s, n) == 0) return id;
    }
    return -1;
}

static void vocab_insert(ds_bpe *b, int32_t id) {
    const char *s = b->spell + b->spell_off[id];
    size_t n = b->spell_len[id];
    size_t i = (size_t)fnv1a(s, n) & (b->vocab_cap - 1);
    for (; b->vocab_slots[i]; i = (i + 1) & (b->vocab_cap - 1)) {
        int32_t other = b->vocab_slots[i] - 1;
        if (b->spell_len[other] == n && memcmp(b->spell + b->spell_off[other], s, n) == 0) return; /* first id wins */
    }
    b->vocab_slots[i] = id + 1;
}

static const merge_slot *merge_find(const ds_bpe *b, int32_t left, int32_t right) {
    if (!b->merge_cap) return NULL;
    uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = (size_t)mix_pair(pair) & (b->merge_cap - 1);; i = (i + 1) & (b->merge_cap - 1)) {
        if (b->merges[i].pair == pair) return &b->merges[i];
        if (b->merges[i].pair == UINT64_MAX) return NULL;
    }
}

void ds_bpe_free(ds_bpe *b) {
    if (!b) return;
    free(b->spell), free(b->dec), free(b->spell_off), free(b->dec_off), free(b->spell_len), free(b->dec_len);
    free(b->special), free(b->vocab_slots), free(b->merges), free(b->specials);
    free(b->name);
    free(b);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static int cmp_special(const void *a, const void *b) {
    const special_tok *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The spellings, their decoded bytes, the token types and the vocabulary table. */
static bool load_tokens(ds_bpe *b, const ds_gguf *g, const ds_gguf_arr *toks, char *err, size_t errlen) {
    const char *name = ds_gguf_name(g);
    uint32_t to_char[256];
    int16_t to_byte[BYTE_CHARS];
    byte_maps(to_char, to_byte);
    size_t total = 0;
    for (int32_t i = 0; i < b->n_vocab; i++) {
        ds_gguf_str s = ds_gguf_arr_str(toks, (uint64_t)i);
        if (s.len > UINT32_MAX) return bfail(err, errlen, name, "token %" PRId32 " is %" PRIu64 " bytes long", i, s.len);
        total += (size_t)s.len;
    }
    size_t n = (size_t)b->n_vocab;
    b->spell = malloc(total + 1), b->dec = malloc(total + 1);
    b->spell_off = malloc(n * sizeof *b->spell_off), b->dec_off = malloc(n * sizeof *b->dec_off);
    b->spell_len = malloc(n * sizeof *b->spell_len), b->dec_len = malloc(n * sizeof *b->dec_len);
    b->special = calloc(n, 1);
    b->vocab_cap = pow2_at_least(2 * n);
    b->vocab_slots = calloc(b->vocab_cap, sizeof *b->vocab_slots);
    b->specials = malloc(n * sizeof *b->specials);
    if (!b->spell || !b->dec || !b->spell_off || !b->dec_off || !b->spell_len || !b->dec_len || !b->special ||
        !b->vocab_slots || !b->specials)
        return bfail(err, errlen, name, "out of memory for %" PRId32 " tokens", b->n_vocab);

    ds_gguf_arr types = {0};
    if (ds_gguf_find_key(g, "tokenizer.ggml.token_type")) {
        if (!ds_gguf_get_arr(g, "tokenizer.ggml.token_type", -1, &types, err, errlen)) return false;
        if (types.count != (uint64_t)n)
            return bfail(err, errlen, name, "tokenizer.ggml.token_type has %" PRIu64 " entries for %" PRId32 " tokens",
                         types.count, b->n_vocab);
    }
    size_t so = 0, dof = 0;
    for (int32_t i = 0; i < b->n_vocab; i++) {
        ds_gguf_str s = ds_gguf_arr_str(toks, (uint64_t)i);
        memcpy(b->spell + so, s.ptr, (size_t)s.len);
        b->spell_off[i] = so, b->spell_len[i] = (uint32_t)s.len;
        so += (size_t)s.len;
        int64_t type = types.count ? ds_gguf_arr_int(&types, (uint64_t)i) : 1;
        bool special = (type == 3 || type == 4) && s.len > 0; /* control, user-defined */
        b->special[i] = special ? (uint8_t)(type == 3 ? 1 : 2) : 0;
        b->dec_off[i] = dof;
        if (special) { /* as written */
            memcpy(b->dec + dof, s.ptr, (size_t)s.len);
            dof += (size_t)s.len;
            b->specials[b->n_specials].len = (uint32_t)s.len;
            b->specials[b->n_specials++].id = i;
            b->special_first[(uint8_t)s.ptr[0]] = 1;
        } else { /* each character of the byte map is its byte; anything else passes through */
            const uint8_t *p = (const uint8_t *)s.ptr;
            for (size_t k = 0, len; k < s.len; k += len) {
                uint32_t cp = utf8_next(p + k, (size_t)s.len - k, &len);
                if (cp < BYTE_CHARS && to_byte[cp] >= 0)
                    b->dec[dof++] = (char)to_byte[cp];
                else
                    memcpy(b->dec + dof, p + k, len), dof += len;
            }
        }
        b->dec_len[i] = (uint32_t)(dof - b->dec_off[i]);
        vocab_insert(b, i);
    }
    qsort(b->specials, (size_t)b->n_specials, sizeof *b->specials, cmp_special);
    for (int c = 0; c < 256; c++) { /* a special token decodes as written, not to its byte */
        char s[4];
        int32_t id = vocab_find(b, s, utf8_put(to_char[c], s));
        b->byte_tok[c] = id >= 0 && !b->special[id] ? id : -1;
    }
    return true;
}

/* Merge ranks: "left right" at index r means the pair (left, right) joins into left+right
 * with rank r; lower ranks join first. */
static bool load_merges(ds_bpe *b, const ds_gguf *g, char *err, size_t errlen) {
    const char *name = ds_gguf_name(g);
    ds_gguf_arr m;
    if (!ds_gguf_find_key(g, "tokenizer.ggml.merges")) return true; /* bytes only */
    if (!ds_gguf_get_arr(g, "tokenizer.ggml.merges", DS_GGUF_STRING, &m, err, errlen)) return false;
    if (m.count > INT32_MAX) return bfail(err, errlen, name, "%" PRIu64 " merges is too many", m.count);
    b->merge_cap = pow2_at_least(2 * (size_t)m.count);
    b->merges = malloc(b->merge_cap * sizeof *b->merges);
    if (!b->merges) return bfail(err, errlen, name, "out of memory for %" PRIu64 " merges", m.count);
    for (size_t i = 0; i < b->merge_cap; i++) b->merges[i].pair = UINT64_MAX;
    char *joined = NULL;
    size_t joined_cap = 0;
    bool ok = true;
    for (uint64_t r = 0; r < m.count && ok; r++) {
        ds_gguf_str s = ds_gguf_arr_str(&m, r);
        const char *sp = memchr(s.ptr, ' ', (size_t)s.len);
        int shown = (int)(s.len > 60 ? 60 : s.len);
        if (!sp) {
            ok = bfail(err, errlen, name, "merge %" PRIu64 " ('%.*s') is not two tokens separated by a space", r, shown, s.ptr);
            break;
        }
        size_t ll = (size_t)(sp - s.ptr), rl = (size_t)s.len - ll - 1;
        if (ll + rl > joined_cap) {
            joined_cap = 2 * (ll + rl) + 16;
            char *j = realloc(joined, joined_cap);
            if (!j) {
                ok = bfail(err, errlen, name, "out of memory");
                break;
            }
            joined = j;
        }
        memcpy(joined, s.ptr, ll);
        memcpy(joined + ll, sp + 1, rl);
        int32_t left = vocab_find(b, s.ptr, ll), right = vocab_find(b, sp + 1, rl), result = vocab_find(b, joined, ll + rl);
        if (left < 0 || right < 0 || result < 0) {
            ok = bfail(err, errlen, name, "merge %" PRIu64 " ('%.*s'): %s is not a token", r, shown, s.ptr,
                       left < 0 ? "its left half" : right < 0 ? "its right half" : "the joined pair");
            break;
        }
        /* the joined token must decode to the halves' bytes, or decode(encode(x)) != x */
        if (b->dec_len[result] != b->dec_len[left] + b->dec_len[right] ||
            memcmp(b->dec + b->dec_off[result], b->dec + b->dec_off[left], b->dec_len[left]) != 0 ||
            memcmp(b->dec + b->dec_off[result] + b->dec_len[left], b->dec + b->dec_off[right], b->dec_len[right]) != 0) {
            ok = bfail(err, errlen, name, "merge %" PRIu64 " ('%.*s'): the joined token does not decode to its halves' bytes",
                       r, shown, s.ptr);
            break;
        }
        uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
        size_t i = (size_t)mix_pair(pair) & (b->merge_cap - 1);
        while (b->merges[i].pair != UINT64_MAX && b->merges[i].pair != pair) i = (i + 1) & (b->merge_cap - 1);
        if (b->merges[i].pair == UINT64_MAX) /* a repeated pair keeps its first (lowest) rank */
            b->merges[i] = (merge_slot){pair, (int32_t)r, result};
    }
    free(joined);
    return ok;
}

/* An optional token id: -1 when absent. */
static bool load_id(const ds_gguf *g, const char *key, int32_t n_vocab, int32_t *id, char *err, size_t errlen) {
    int64_t v;
    *id = -1;
    if (!ds_gguf_find_key(g, key)) return true;
    if (!ds_gguf_get_int(g, key, 0, n_vocab - 1, &v, err, errlen)) return false;
    *id = (int32_t)v;
    return true;
}

ds_bpe *ds_bpe_from_gguf(const ds_gguf *g, char *err, size_t errlen) {
    const char *name = ds_gguf_name(g);
    ds_gguf_str model, pre;
    if (!ds_gguf_get_str(g, "tokenizer.ggml.model", &model, err, errlen)) return NULL;
    if (!ds_gguf_str_eq(model, "gpt2")) {
        bfail(err, errlen, name, "tokenizer.ggml.model is '%.*s': only 'gpt2' (byte-level BPE) is implemented",
              (int)(model.len > 40 ? 40 : model.len), model.ptr);
        return NULL;
    }
    ds_bpe_pre kind = DS_BPE_PRE_GPT2;
    if (ds_gguf_find_key(g, "tokenizer.ggml.pre")) {
        if (!ds_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err, errlen)) return NULL;
        /* llama.cpp splits these the same way: digits alone, then GPT-2's rule */
        static const char *const digits_apart[] = {"smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva"};
        bool known = ds_gguf_str_eq(pre, "gpt2");
        for (size_t i = 0; i < sizeof digits_apart / sizeof digits_apart[0]; i++)
            if (ds_gguf_str_eq(pre, digits_apart[i])) known = true, kind = DS_BPE_PRE_SMOLLM;
        if (!known) {
            bfail(err, errlen, name, "tokenizer.ggml.pre '%.*s' is not implemented (gpt2 and smollm are)",
                  (int)(pre.len > 40 ? 40 : pre.len), pre.ptr);
            return NULL;
        }
    }
    ds_gguf_arr toks;
    if (!ds_gguf_get_arr(g, "tokenizer.ggml.tokens", DS_GGUF_STRING, &toks, err, errlen)) return NULL;
    if (toks.count == 0 || toks.count >= INT32_MAX) {
        bfail(err, errlen, name, "tokenizer.ggml.tokens holds %" PRIu64 " tokens", toks.count);
        return NULL;
    }
    ds_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        bfail(err, errlen, name, "out of memory");
        return NULL;
    }
    b->n_vocab = (int32_t)toks.count;
    b->pre = kind;
    b->name = malloc(strlen(name) + 1);
    if (b->name) strcpy(b->name, name);
    else bfail(err, errlen, name, "out of memory");
    if (!b->name || !load_tokens(b, g, &toks, err, errlen) || !load_merges(b, g, err, errlen) ||
        !load_id(g, "tokenizer.ggml.bos_token_id", b->n_vocab, &b->bos, err, errlen) ||
        !load_id(g, "tokenizer.ggml.eos_token_id", b->n_vocab, &b->eos, err, errlen)) {
        ds_bpe_free(b);
        return NULL;
    }
    return b;
}

int32_t ds_bpe_n_vocab(const ds_bpe *b) { return b->n_vocab; }
int32_t ds_bpe_bos(const ds_bpe *b) { return b->bos; }
int32_t ds_bpe_eos(const ds_bpe *b) { return b->eos; }
ds_bpe_pre ds_bpe_pre_kind(const ds_bpe *b) { return b->pre; }
bool ds_bpe_is_control(const ds_bpe *b, int32_t id) { return id >= 0 && id < b->n_vocab && b->special[id] == 1; }
int32_t ds_bpe_token_id(const ds_bpe *b, const char *spelling) { return vocab_find(b, spelling, strlen(spelling)); }

bool ds_bpe_has_byte(const ds_bpe *b, uint8_t byte) { return b->byte_tok[byte] >= 0; }

const char *ds_bpe_token_bytes(const ds_bpe *b, int32_t id, size_t *len) {
    if (id < 0 || id >= b->n_vocab) return NULL;
    *len = b->dec_len[id];
    return b->dec + b->dec_off[id];
}

/* ==== pre-tokenisation ======================================================================= */

static int class_at(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint32_t cp = utf8_next(s + i, n - i, len);
    return cp == INVALID_CP ? CL_OTHER : cp_class(cp);
}

/* The end of the pre-token starting at i: GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched by hand, leftmost alternative first. With digits apart (smollm), every \p{N}
 * character is a piece of its own and ends the stretch of text the pattern sees. */
static size_t next_piece(ds_bpe_pre pre, const uint8_t *s, size_t n, size_t i) {
    bool apart = pre == DS_BPE_PRE_SMOLLM;
    size_t len0, len;
    int k0 = class_at(s, n, i, &len0);
    if (apart && k0 == CL_NUMBER) return i + len0;
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1], c = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && c == 'e') || (a == 'v' && c == 'e') || (a == 'l' && c == 'l')) return i + 3;
    }
    size_t j = i;
    int k = k0;
    if (s[i] == ' ' && i + 1 < n) { /* one optional leading space before a run */
        int k1 = class_at(s, n, i + 1, &len);
        if (k1 != CL_SPACE && !(apart && k1 == CL_NUMBER)) j = i + 1, k = k1;
    }
    if (k != CL_SPACE) {
        size_t p = j;
        while (p < n && class_at(s, n, p, &len) == k) p += len;
        return p;
    }
    /* whitespace: the whole run when nothing (or a piece boundary) follows it, else all but
     * its last character, which then leads the next piece; a single one stands alone */
    size_t p = i, last = i, count = 0;
    int kp = CL_SPACE;
    while (p < n && (kp = class_at(s, n, p, &len)) == CL_SPACE) last = p, p += len, count++;
    if (p >= n || (apart && kp == CL_NUMBER)) return p;
    return count >= 2 ? last : p;
}

size_t ds_bpe_pretokenize(ds_bpe_pre pre, const char *text, size_t len, size_t *ends, size_t cap) {
    size_t count = 0;
    for (size_t i = 0; i < len; count++) {
        i = next_piece(pre, (const uint8_t *)text, len, i);
        if (count < cap) ends[count] = i;
    }
    return count;
}

/* ==== encode and decode ====================================================================== */

typedef struct {
    int32_t *ids;
    int64_t cap, n;
    int32_t *sym, *rank; /* scratch: one piece's symbols and the rank of each adjacent pair */
} out_ids;

static void emit(out_ids *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

static int32_t pair_rank(const ds_bpe *b, int32_t l, int32_t r) {
    const merge_slot *m = merge_find(b, l, r);
    return m ? m->rank : INT32_MAX;
}

/* One pre-token: its bytes as byte tokens, then the lowest-ranked adjacent pair joined
 * (leftmost on a tie) until no pair has a merge. A byte with no token of its own is dropped
 * first, as HuggingFace tokenizers drops it (the unknown token, where a file names one, is
 * often end-of-text: worse than nothing in the middle of a prompt). */
static void bpe_piece(const ds_bpe *b, const uint8_t *s, size_t n, out_ids *o) {
    int32_t *sym = o->sym, *rank = o->rank;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (b->byte_tok[s[i]] >= 0) sym[m++] = b->byte_tok[s[i]];
    for (size_t i = 0; i + 1 < m; i++) rank[i] = pair_rank(b, sym[i], sym[i + 1]);
    while (m > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < m; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == INT32_MAX) break;
        sym[best] = merge_find(b, sym[best], sym[best + 1])->result;
        memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof *sym);
        memmove(rank + best, rank + best + 1, (m - best - 2) * sizeof *rank);
        m--;
        if (best > 0) rank[best - 1] = pair_rank(b, sym[best - 1], sym[best]);
        if (best + 1 < m) rank[best] = pair_rank(b, sym[best], sym[best + 1]);
    }
    for (size_t i = 0; i < m; i++) emit(o, sym[i]);
}

static void encode_plain(const ds_bpe *b, const uint8_t *s, size_t n, out_ids *o) {
    for (size_t i = 0; i < n;) {
        size_t end = next_piece(b->pre, s, n, i);
        bpe_piece(b, s + i, end - i, o);
        i = end;
    }
}

/* The longest special token at s[0 .. n), or -1. */
static int32_t special_at(const ds_bpe *b, const uint8_t *s, size_t n, size_t *len) {
    if (!b->special_first[s[0]]) return -1;
    for (int32_t k = 0; k < b->n_specials; k++) {
        const special_tok *t = &b->specials[k];
        if (t->len <= n && memcmp(b->spell + b->spell_off[t->id], s, t->len) == 0) {
            *len = t->len;
            return t->id;
        }
    }
    return -1;
}

int64_t ds_bpe_encode(const ds_bpe *b, const char *text, size_t len, unsigned flags, int32_t *ids, int64_t cap,
                      char *err, size_t errlen) {
    const uint8_t *s = (const uint8_t *)text;
    out_ids o = {ids, cap, 0, malloc((len + 1) * sizeof(int32_t)), malloc((len + 1) * sizeof(int32_t))};
    int64_t rc = -1;
    if (!o.sym || !o.rank) {
        bfail(err, errlen, b->name, "out of memory for %zu bytes of text", len);
        goto done;
    }
    if ((flags & DS_BPE_ADD_BOS) && b->bos >= 0) emit(&o, b->bos);
    size_t seg = 0;
    if ((flags & DS_BPE_SPECIAL) && b->n_specials)
        for (size_t i = 0; i < len;) {
            size_t sl;
            int32_t id = special_at(b, s + i, len - i, &sl);
            if (id < 0) {
                i++;
                continue;
            }
            encode_plain(b, s + seg, i - seg, &o);
            emit(&o, id);
            i += sl;
            seg = i;
        }
    encode_plain(b, s + seg, len - seg, &o);
    rc = o.n;
done:
    free(o.sym);
    free(o.rank);
    return rc;
}

int64_t ds_bpe_decode(const ds_bpe *b, const int32_t *ids, int64_t n, char *out, size_t cap, char *err, size_t errlen) {
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= b->n_vocab) {
            bfail(err, errlen, b->name, "token id %" PRId32 " at position %" PRId64 " is outside [0, %" PRId32 ")", ids[i],
                  i, b->n_vocab);
            return -1;
        }
        uint32_t l = b->dec_len[ids[i]];
        if (cap && total < cap - 1) memcpy(out + total, b->dec + b->dec_off[ids[i]], l < cap - 1 - total ? l : cap - 1 - total);
        total += l;
    }
    if (cap) out[total < cap - 1 ? total : cap - 1] = 0;
    return (int64_t)total;
}

/* ==== Unicode classes ========================================================================
 * \s is Unicode White_Space. \p{L} and \p{N} are the code points whose general category
 * starts with L (letters) or N (numbers), as ranges listed from the Unicode Character
 * Database 14.0. */

static bool is_space(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first range whose end is >= c */
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid][1] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo][0] <= c;
}

static const uint32_t letter_ranges[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xAA, 0xAA}, {0xB5, 0xB5}, {0xBA, 0xBA}, {0xC0, 0xD6},
    {0xD8, 0xF6}, {0xF8, 0x2C1}, {0x2C6, 0x2D1}, {0x2E0, 0x2E4}, {0x2EC, 0x2EC}, {0x2EE, 0x2EE},
    {0x370, 0x374}, {0x376, 0x377}, {0x37A, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A},
    {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x559, 0x559}, {0x560, 0x588}, {0x5D0, 0x5EA}, {0x5EF, 0x5F2}, {0x620, 0x64A}, {0x66E, 0x66F},
    {0x671, 0x6D3}, {0x6D5, 0x6D5}, {0x6E5, 0x6E6}, {0x6EE, 0x6EF}, {0x6FA, 0x6FC}, {0x6FF, 0x6FF},
    {0x710, 0x710}, {0x712, 0x72F}, {0x74D, 0x7A5}, {0x7B1, 0x7B1}, {0x7CA, 0x7EA}, {0x7F4, 0x7F5},
    {0x7FA, 0x7FA}, {0x800, 0x815}, {0x81A, 0x81A}, {0x824, 0x824}, {0x828, 0x828}, {0x840, 0x858},
    {0x860, 0x86A}, {0x870, 0x887}, {0x889, 0x88E}, {0x8A0, 0x8C9}, {0x904, 0x939}, {0x93D, 0x93D},
    {0x950, 0x950}, {0x958, 0x961}, {0x971, 0x980}, {0x985, 0x98C}, {0x98F, 0x990}, {0x993, 0x9A8},
    {0x9AA, 0x9B0}, {0x9B2, 0x9B2}, {0x9B6, 0x9B9}, {0x9BD, 0x9BD}, {0x9CE, 0x9CE}, {0x9DC, 0x9DD},
    {0x9DF, 0x9E1}, {0x9F0, 0x9F1}, {0x9FC, 0x9FC}, {0xA05, 0xA0A}, {0xA0F, 0xA10}, {0xA13, 0xA28},
    {0xA2A, 0xA30}, {0xA32, 0xA33}, {0xA35, 0xA36}, {0xA38, 0xA39}, {0xA59, 0xA5C}, {0xA5E, 0xA5E},
    {0xA72, 0xA74}, {0xA85, 0xA8D}, {0xA8F, 0xA91}, {0xA93, 0xAA8}, {0xAAA, 0xAB0}, {0xAB2, 0xAB3},
    {0xAB5, 0xAB9}, {0xABD, 0xABD}, {0xAD0, 0xAD0}, {0xAE0, 0xAE1}, {0xAF9, 0xAF9}, {0xB05, 0xB0C},
    {0xB0F, 0xB10}, {0xB13, 0xB28}, {0xB2A, 0xB30}, {0xB32, 0xB33}, {0xB35, 0xB39}, {0xB3D, 0xB3D},
    {0xB5C, 0xB5D}, {0xB5F, 0xB61}, {0xB71, 0xB71}, {0xB83, 0xB83}, {0xB85, 0xB8A}, {0xB8E, 0xB90},
    {0xB92, 0xB95}, {0xB99, 0xB9A}, {0xB9C, 0xB9C}, {0xB9E, 0xB9F}, {0xBA3, 0xBA4}, {0xBA8, 0xBAA},
    {0xBAE, 0xBB9}, {0xBD0, 0xBD0}, {0xC05, 0xC0C}, {0xC0E, 0xC10}, {0xC12, 0xC28}, {0xC2A, 0xC39},
    {0xC3D, 0xC3D}, {0xC58, 0xC5A}, {0xC5D, 0xC5D}, {0xC60, 0xC61}, {0xC80, 0xC80}, {0xC85, 0xC8C},
    {0xC8E, 0xC90}, {0xC92, 0xCA8}, {0xCAA, 0xCB3}, {0xCB5, 0xCB9}, {0xCBD, 0xCBD}, {0xCDD, 0xCDE},
    {0xCE0, 0xCE1}, {0xCF1, 0xCF2}, {0xD04, 0xD0C}, {0xD0E, 0xD10}, {0xD12, 0xD3A}, {0xD3D, 0xD3D},
    {0xD4E, 0xD4E}, {0xD54, 0xD56}, {0xD5F, 0xD61}, {0xD7A, 0xD7F}, {0xD85, 0xD96}, {0xD9A, 0xDB1},
    {0xDB3, 0xDBB}, {0xDBD, 0xDBD}, {0xDC0, 0xDC6}, {0xE01, 0xE30}, {0xE32, 0xE33}, {0xE40, 0xE46},
    {0xE81, 0xE82}, {0xE84, 0xE84}, {0xE86, 0xE8A}, {0xE8C, 0xEA3}, {0xEA5, 0xEA5}, {0xEA7, 0xEB0},
    {0xEB2, 0xEB3}, {0xEBD, 0xEBD}, {0xEC0, 0xEC4}, {0xEC6, 0xEC6}, {0xEDC, 0xEDF}, {0xF00, 0xF00},
    {0xF40, 0xF47}, {0xF49, 0xF6C}, {0xF88, 0xF8C}, {0x1000, 0x102A}, {0x103F, 0x103F},
    {0x1050, 0x1055}, {0x105A, 0x105D}, {0x1061, 0x1061}, {0x1065, 0x1066}, {0x106E, 0x1070},
    {0x1075, 0x1081}, {0x108E, 0x108E}, {0x10A0, 0x10C5}, {0x10C7, 0x10C7}, {0x10CD, 0x10CD},
    {0x10D0, 0x10FA}, {0x10FC, 0x1248}, {0x124A, 0x124D}, {0x1250, 0x1256}, {0x1258, 0x1258},
    {0x125A, 0x125D}, {0x1260, 0x1288}, {0x128A, 0x128D}, {0x1290, 0x12B0}, {0x12B2, 0x12B5},
    {0x12B8, 0x12BE}, {0x12C0, 0x12C0}, {0x12C2, 0x12C5}, {0x12C8, 0x12D6}, {0x12D8, 0x1310},
    {0x1312, 0x1315}, {0x1318, 0x135A}, {0x1380, 0x138F}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD},
    {0x1401, 0x166C}, {0x166F, 0x167F}, {0x1681, 0x169A}, {0x16A0, 0x16EA}, {0x16F1, 0x16F8},
    {0x1700, 0x1711}, {0x171F, 0x1731}, {0x1740, 0x1751}, {0x1760, 0x176C}, {0x176E, 0x1770},
    {0x1780, 0x17B3}, {0x17D7, 0x17D7}, {0x17DC, 0x17DC}, {0x1820, 0x1878}, {0x1880, 0x1884},
    {0x1887, 0x18A8}, {0x18AA, 0x18AA}, {0x18B0, 0x18F5}, {0x1900, 0x191E}, {0x1950, 0x196D},
    {0x1970, 0x1974}, {0x1980, 0x19AB}, {0x19B0, 0x19C9}, {0x1A00, 0x1A16}, {0x1A20, 0x1A54},
    {0x1AA7, 0x1AA7}, {0x1B05, 0x1B33}, {0x1B45, 0x1B4C}, {0x1B83, 0x1BA0}, {0x1BAE, 0x1BAF},
    {0x1BBA, 0x1BE5}, {0x1C00, 0x1C23}, {0x1C4D, 0x1C4F}, {0x1C5A, 0x1C7D}, {0x1C80, 0x1C88},
    {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1CE9, 0x1CEC}, {0x1CEE, 0x1CF3}, {0x1CF5, 0x1CF6},
    {0x1CFA, 0x1CFA}, {0x1D00, 0x1DBF}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4},
    {0x1FF6, 0x1FFC}, {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124},
    {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0x2D00, 0x2D25}, {0x2D27, 0x2D27}, {0x2D2D, 0x2D2D}, {0x2D30, 0x2D67},
    {0x2D6F, 0x2D6F}, {0x2D80, 0x2D96}, {0x2DA0, 0x2DA6}, {0x2DA8, 0x2DAE}, {0x2DB0, 0x2DB6},
    {0x2DB8, 0x2DBE}, {0x2DC0, 0x2DC6}, {0x2DC8, 0x2DCE}, {0x2DD0, 0x2DD6}, {0x2DD8, 0x2DDE},
    {0x2E2F, 0x2E2F}, {0x3005, 0x3006}, {0x3031, 0x3035}, {0x303B, 0x303C}, {0x3041, 0x3096},
    {0x309D, 0x309F}, {0x30A1, 0x30FA}, {0x30FC, 0x30FF}, {0x3105, 0x312F}, {0x3131, 0x318E},
    {0x31A0, 0x31BF}, {0x31F0, 0x31FF}, {0x3400, 0x4DBF}, {0x4E00, 0xA48C}, {0xA4D0, 0xA4FD},
    {0xA500, 0xA60C}, {0xA610, 0xA61F}, {0xA62A, 0xA62B}, {0xA640, 0xA66E}, {0xA67F, 0xA69D},
    {0xA6A0, 0xA6E5}, {0xA717, 0xA71F}, {0xA722, 0xA788}, {0xA78B, 0xA7CA}, {0xA7D0, 0xA7D1},
    {0xA7D3, 0xA7D3}, {0xA7D5, 0xA7D9}, {0xA7F2, 0xA801}, {0xA803, 0xA805}, {0xA807, 0xA80A},
    {0xA80C, 0xA822}, {0xA840, 0xA873}, {0xA882, 0xA8B3}, {0xA8F2, 0xA8F7}, {0xA8FB, 0xA8FB},
    {0xA8FD, 0xA8FE}, {0xA90A, 0xA925}, {0xA930, 0xA946}, {0xA960, 0xA97C}, {0xA984, 0xA9B2},
    {0xA9CF, 0xA9CF}, {0xA9E0, 0xA9E4}, {0xA9E6, 0xA9EF}, {0xA9FA, 0xA9FE}, {0xAA00, 0xAA28},
    {0xAA40, 0xAA42}, {0xAA44, 0xAA4B}, {0xAA60, 0xAA76}, {0xAA7A, 0xAA7A}, {0xAA7E, 0xAAAF},
    {0xAAB1, 0xAAB1}, {0xAAB5, 0xAAB6}, {0xAAB9, 0xAABD}, {0xAAC0, 0xAAC0}, {0xAAC2, 0xAAC2},
    {0xAADB, 0xAADD}, {0xAAE0, 0xAAEA}, {0xAAF2, 0xAAF4}, {0xAB01, 0xAB06}, {0xAB09, 0xAB0E},
    {0xAB11, 0xAB16}, {0xAB20, 0xAB26}, {0xAB28, 0xAB2E}, {0xAB30, 0xAB5A}, {0xAB5C, 0xAB69},
    {0xAB70, 0xABE2}, {0xAC00, 0xD7A3}, {0xD7B0, 0xD7C6}, {0xD7CB, 0xD7FB}, {0xF900, 0xFA6D},
    {0xFA70, 0xFAD9}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFB1D, 0xFB1D}, {0xFB1F, 0xFB28},
    {0xFB2A, 0xFB36}, {0xFB38, 0xFB3C}, {0xFB3E, 0xFB3E}, {0xFB40, 0xFB41}, {0xFB43, 0xFB44},
    {0xFB46, 0xFBB1}, {0xFBD3, 0xFD3D}, {0xFD50, 0xFD8F}, {0xFD92, 0xFDC7}, {0xFDF0, 0xFDFB},
    {0xFE70, 0xFE74}, {0xFE76, 0xFEFC}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFFBE},
    {0xFFC2, 0xFFC7}, {0xFFCA, 0xFFCF}, {0xFFD2, 0xFFD7}, {0xFFDA, 0xFFDC}, {0x10000, 0x1000B},
    {0x1000D, 0x10026}, {0x10028, 0x1003A}, {0x1003C, 0x1003D}, {0x1003F, 0x1004D},
    {0x10050, 0x1005D}, {0x10080, 0x100FA}, {0x10280, 0x1029C}, {0x102A0, 0x102D0},
    {0x10300, 0x1031F}, {0x1032D, 0x10340}, {0x10342, 0x10349}, {0x10350, 0x10375},
    {0x10380, 0x1039D}, {0x103A0, 0x103C3}, {0x103C8, 0x103CF}, {0x10400, 0x1049D},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10500, 0x10527}, {0x10530, 0x10563},
    {0x10570, 0x1057A}, {0x1057C, 0x1058A}, {0x1058C, 0x10592}, {0x10594, 0x10595},
    {0x10597, 0x105A1}, {0x105A3, 0x105B1}, {0x105B3, 0x105B9}, {0x105BB, 0x105BC},
    {0x10600, 0x10736}, {0x10740, 0x10755}, {0x10760, 0x10767}, {0x10780, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x10800, 0x10805}, {0x10808, 0x10808},
    {0x1080A, 0x10835}, {0x10837, 0x10838}, {0x1083C, 0x1083C}, {0x1083F, 0x10855},
    {0x10860, 0x10876}, {0x10880, 0x1089E}, {0x108E0, 0x108F2}, {0x108F4, 0x108F5},
    {0x10900, 0x10915}, {0x10920, 0x10939}, {0x10980, 0x109B7}, {0x109BE, 0x109BF},
    {0x10A00, 0x10A00}, {0x10A10, 0x10A13}, {0x10A15, 0x10A17}, {0x10A19, 0x10A35},
    {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C}, {0x10AC0, 0x10AC7}, {0x10AC9, 0x10AE4},
    {0x10B00, 0x10B35}, {0x10B40, 0x10B55}, {0x10B60, 0x10B72}, {0x10B80, 0x10B91},
    {0x10C00, 0x10C48}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x10D00, 0x10D23},
    {0x10E80, 0x10EA9}, {0x10EB0, 0x10EB1}, {0x10F00, 0x10F1C}, {0x10F27, 0x10F27},
    {0x10F30, 0x10F45}, {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4}, {0x10FE0, 0x10FF6},
    {0x11003, 0x11037}, {0x11071, 0x11072}, {0x11075, 0x11075}, {0x11083, 0x110AF},
    {0x110D0, 0x110E8}, {0x11103, 0x11126}, {0x11144, 0x11144}, {0x11147, 0x11147},
    {0x11150, 0x11172}, {0x11176, 0x11176}, {0x11183, 0x111B2}, {0x111C1, 0x111C4},
    {0x111DA, 0x111DA}, {0x111DC, 0x111DC}, {0x11200, 0x11211}, {0x11213, 0x1122B},
    {0x11280, 0x11286}, {0x11288, 0x11288}, {0x1128A, 0x1128D}, {0x1128F, 0x1129D},
    {0x1129F, 0x112A8}, {0x112B0, 0x112DE}, {0x11305, 0x1130C}, {0x1130F, 0x11310},
    {0x11313, 0x11328}, {0x1132A, 0x11330}, {0x11332, 0x11333}, {0x11335, 0x11339},
    {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361}, {0x11400, 0x11434},
    {0x11447, 0x1144A}, {0x1145F, 0x11461}, {0x11480, 0x114AF}, {0x114C4, 0x114C5},
    {0x114C7, 0x114C7}, {0x11580, 0x115AE}, {0x115D8, 0x115DB}, {0x11600, 0x1162F},
    {0x11644, 0x11644}, {0x11680, 0x116AA}, {0x116B8, 0x116B8}, {0x11700, 0x1171A},
    {0x11740, 0x11746}, {0x11800, 0x1182B}, {0x118A0, 0x118DF}, {0x118FF, 0x11906},
    {0x11909, 0x11909}, {0x1190C, 0x11913}, {0x11915, 0x11916}, {0x11918, 0x1192F},
    {0x1193F, 0x1193F}, {0x11941, 0x11941}, {0x119A0, 0x119A7}, {0x119AA, 0x119D0},
    {0x119E1, 0x119E1}, {0x119E3, 0x119E3}, {0x11A00, 0x11A00}, {0x11A0B, 0x11A32},
    {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50}, {0x11A5C, 0x11A89}, {0x11A9D, 0x11A9D},
    {0x11AB0, 0x11AF8}, {0x11C00, 0x11C08}, {0x11C0A, 0x11C2E}, {0x11C40, 0x11C40},
    {0x11C72, 0x11C8F}, {0x11D00, 0x11D06}, {0x11D08, 0x11D09}, {0x11D0B, 0x11D30},
    {0x11D46, 0x11D46}, {0x11D60, 0x11D65}, {0x11D67, 0x11D68}, {0x11D6A, 0x11D89},
    {0x11D98, 0x11D98}, {0x11EE0, 0x11EF2}, {0x11FB0, 0x11FB0}, {0x12000, 0x12399},
    {0x12480, 0x12543}, {0x12F90, 0x12FF0}, {0x13000, 0x1342E}, {0x14400, 0x14646},
    {0x16800, 0x16A38}, {0x16A40, 0x16A5E}, {0x16A70, 0x16ABE}, {0x16AD0, 0x16AED},
    {0x16B00, 0x16B2F}, {0x16B40, 0x16B43}, {0x16B63, 0x16B77}, {0x16B7D, 0x16B8F},
    {0x16E40, 0x16E7F}, {0x16F00, 0x16F4A}, {0x16F50, 0x16F50}, {0x16F93, 0x16F9F},
    {0x16FE0, 0x16FE1}, {0x16FE3, 0x16FE3}, {0x17000, 0x187F7}, {0x18800, 0x18CD5},
    {0x18D00, 0x18D08}, {0x1AFF0, 0x1AFF3}, {0x1AFF5, 0x1AFFB}, {0x1AFFD, 0x1AFFE},
    {0x1B000, 0x1B122}, {0x1B150, 0x1B152}, {0x1B164, 0x1B167}, {0x1B170, 0x1B2FB},
    {0x1BC00, 0x1BC6A}, {0x1BC70, 0x1BC7C}, {0x1BC80, 0x1BC88}, {0x1BC90, 0x1BC99},
    {0x1D400, 0x1D454}, {0x1D456, 0x1D49C}, {0x1D49E, 0x1D49F}, {0x1D4A2, 0x1D4A2},
    {0x1D4A5, 0x1D4A6}, {0x1D4A9, 0x1D4AC}, {0x1D4AE, 0x1D4B9}, {0x1D4BB, 0x1D4BB},
    {0x1D4BD, 0x1D4C3}, {0x1D4C5, 0x1D505}, {0x1D507, 0x1D50A}, {0x1D50D, 0x1D514},
    {0x1D516, 0x1D51C}, {0x1D51E, 0x1D539}, {0x1D53B, 0x1D53E}, {0x1D540, 0x1D544},
    {0x1D546, 0x1D546}, {0x1D54A, 0x1D550}, {0x1D552, 0x1D6A5}, {0x1D6A8, 0x1D6C0},
    {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA}, {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734},
    {0x1D736, 0x1D74E}, {0x1D750, 0x1D76E}, {0x1D770, 0x1D788}, {0x1D78A, 0x1D7A8},
    {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB}, {0x1DF00, 0x1DF1E}, {0x1E100, 0x1E12C},
    {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E}, {0x1E290, 0x1E2AD}, {0x1E2C0, 0x1E2EB},
    {0x1E7E0, 0x1E7E6}, {0x1E7E8, 0x1E7EB}, {0x1E7ED, 0x1E7EE}, {0x1E7F0, 0x1E7FE},
    {0x1E800, 0x1E8C4}, {0x1E900, 0x1E943}, {0x1E94B, 0x1E94B}, {0x1EE00, 0x1EE03},
    {0x1EE05, 0x1EE1F}, {0x1EE21, 0x1EE22}, {0x1EE24, 0x1EE24}, {0x1EE27, 0x1EE27},
    {0x1EE29, 0x1EE32}, {0x1EE34, 0x1EE37}, {0x1EE39, 0x1EE39}, {0x1EE3B, 0x1EE3B},
    {0x1EE42, 0x1EE42}, {0x1EE47, 0x1EE47}, {0x1EE49, 0x1EE49}, {0x1EE4B, 0x1EE4B},
    {0x1EE4D, 0x1EE4F}, {0x1EE51, 0x1EE52}, {0x1EE54, 0x1EE54}, {0x1EE57, 0x1EE57},
    {0x1EE59, 0x1EE59}, {0x1EE5B, 0x1EE5B}, {0x1EE5D, 0x1EE5D}, {0x1EE5F, 0x1EE5F},
    {0x1EE61, 0x1EE62}, {0x1EE64, 0x1EE64}, {0x1EE67, 0x1EE6A}, {0x1EE6C, 0x1EE72},
    {0x1EE74, 0x1EE77}, {0x1EE79, 0x1EE7C}, {0x1EE7E, 0x1EE7E}, {0x1EE80, 0x1EE89},
    {0x1EE8B, 0x1EE9B}, {0x1EEA1, 0x1EEA3}, {0x1EEA5, 0x1EEA9}, {0x1EEAB, 0x1EEBB},
    {0x20000, 0x2A6DF}, {0x2A700, 0x2B738}, {0x2B740, 0x2B81D}, {0x2B820, 0x2CEA1},
    {0x2CEB0, 0x2EBE0}, {0x2F800, 0x2FA1D}, {0x30000, 0x3134A},
};
static const uint32_t number_ranges[][2] = {
    {0x30, 0x39}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9},
    {0x7C0, 0x7C9}, {0x966, 0x96F}, {0x9E6, 0x9EF}, {0x9F4, 0x9F9}, {0xA66, 0xA6F}, {0xAE6, 0xAEF},
    {0xB66, 0xB6F}, {0xB72, 0xB77}, {0xBE6, 0xBF2}, {0xC66, 0xC6F}, {0xC78, 0xC7E}, {0xCE6, 0xCEF},
    {0xD58, 0xD5E}, {0xD66, 0xD78}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33},
    {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x137C}, {0x16EE, 0x16F0}, {0x17E0, 0x17E9},
    {0x17F0, 0x17F9}, {0x1810, 0x1819}, {0x1946, 0x194F}, {0x19D0, 0x19DA}, {0x1A80, 0x1A89},
    {0x1A90, 0x1A99}, {0x1B50, 0x1B59}, {0x1BB0, 0x1BB9}, {0x1C40, 0x1C49}, {0x1C50, 0x1C59},
    {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189},
    {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x2CFD, 0x2CFD}, {0x3007, 0x3007},
    {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F},
    {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0xA620, 0xA629}, {0xA6E6, 0xA6EF},
    {0xA830, 0xA835}, {0xA8D0, 0xA8D9}, {0xA900, 0xA909}, {0xA9D0, 0xA9D9}, {0xA9F0, 0xA9F9},
    {0xAA50, 0xAA59}, {0xABF0, 0xABF9}, {0xFF10, 0xFF19}, {0x10107, 0x10133}, {0x10140, 0x10178},
    {0x1018A, 0x1018B}, {0x102E1, 0x102FB}, {0x10320, 0x10323}, {0x10341, 0x10341},
    {0x1034A, 0x1034A}, {0x103D1, 0x103D5}, {0x104A0, 0x104A9}, {0x10858, 0x1085F},
    {0x10879, 0x1087F}, {0x108A7, 0x108AF}, {0x108FB, 0x108FF}, {0x10916, 0x1091B},
    {0x109BC, 0x109BD}, {0x109C0, 0x109CF}, {0x109D2, 0x109FF}, {0x10A40, 0x10A48},
    {0x10A7D, 0x10A7E}, {0x10A9D, 0x10A9F}, {0x10AEB, 0x10AEF}, {0x10B58, 0x10B5F},
    {0x10B78, 0x10B7F}, {0x10BA9, 0x10BAF}, {0x10CFA, 0x10CFF}, {0x10D30, 0x10D39},
    {0x10E60, 0x10E7E}, {0x10F1D, 0x10F26}, {0x10F51, 0x10F54}, {0x10FC5, 0x10FCB},
    {0x11052, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F}, {0x111D0, 0x111D9},
    {0x111E1, 0x111F4}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9},
    {0x11650, 0x11659}, {0x116C0, 0x116C9}, {0x11730, 0x1173B}, {0x118E0, 0x118F2},
    {0x11950, 0x11959}, {0x11C50, 0x11C6C}, {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9},
    {0x11FC0, 0x11FD4}, {0x12400, 0x1246E}, {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9},
    {0x16B50, 0x16B59}, {0x16B5B, 0x16B61}, {0x16E80, 0x16E96}, {0x1D2E0, 0x1D2F3},
    {0x1D360, 0x1D378}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9},
    {0x1E8C7, 0x1E8CF}, {0x1E950, 0x1E959}, {0x1EC71, 0x1ECAB}, {0x1ECAD, 0x1ECAF},
    {0x1ECB1, 0x1ECB4}, {0x1ED01, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C},
    {0x1FBF0, 0x1FBF9},
};

static int cp_class(uint32_t c) {
    if (c < 128) {
        if ((c | 32) >= 'a' && (c | 32) <= 'z') return CL_LETTER;
        if (c >= '0' && c <= '9') return CL_NUMBER;
        return is_space(c) ? CL_SPACE : CL_OTHER;
    }
    if (is_space(c)) return CL_SPACE;
    if (in_ranges(c, letter_ranges, sizeof letter_ranges / sizeof letter_ranges[0])) return CL_LETTER;
    if (in_ranges(c, number_ranges, sizeof number_ranges / sizeof number_ranges[0])) return CL_NUMBER;
    return CL_OTHER;
}
