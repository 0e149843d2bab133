/* ds_gguf_write.c - a small GGUF writer (metadata of every type, F32/F16/Q8_0/Q4_0/Q4_1
 * tensors quantised from float32, any alignment) and the project's tiny llama model, whose
 * weights come from the counter RNG (hence this file's one dependency, pl_rng). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_gguf.h"
#include "pl_rng.h" // defines: pl_rng_value

/* ==== quantisation ========================================================================== */

#define FP16_MAX 65504.0f

/* round-to-nearest (ties away from zero), clamped to [lo, hi]; v is finite */
static int qround(float v, int lo, int hi) {
    float r = roundf(v);
    return r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* The block's scale as fp16, and the float it decodes to: the quantised values are chosen
 * against the scale the reader will see, not the unrounded one. */
static float scale16(float d, uint8_t *dst) {
    uint16_t h = ds_fp32_to_fp16(d);
    put16(dst, h);
    return ds_fp16_to_fp32(h);
}

static void quantize_q8_0(const float *x, uint8_t *b) {
    float amax = 0;
    for (int j = 0; j < DS_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = scale16(amax / 127.0f, b);
    for (int j = 0; j < DS_QK; j++) b[2 + j] = (uint8_t)(int8_t)(d != 0 ? qround(x[j] / d, -127, 127) : 0);
}

/* d is signed so that the value of largest magnitude maps exactly to -8, the end of [-8, 7]
 * that has room for it; values of the other sign clamp at +7. */
static void quantize_q4_0(const float *x, uint8_t *b) {
    float amax = 0, max = 0;
    for (int j = 0; j < DS_QK; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    float d = scale16(max / -8.0f, b);
    for (int j = 0; j < DS_QK / 2; j++) {
        int lo = d != 0 ? qround(x[j] / d + 8.0f, 0, 15) : 8;
        int hi = d != 0 ? qround(x[j + DS_QK / 2] / d + 8.0f, 0, 15) : 8;
        b[2 + j] = (uint8_t)(lo | hi << 4);
    }
}

static void quantize_q4_1(const float *x, uint8_t *b) {
    float min = x[0], max = x[0];
    for (int j = 1; j < DS_QK; j++) min = fminf(min, x[j]), max = fmaxf(max, x[j]);
    float d = scale16((max - min) / 15.0f, b);
    float m = scale16(min, b + 2);
    for (int j = 0; j < DS_QK / 2; j++) {
        int lo = d != 0 ? qround((x[j] - m) / d, 0, 15) : 0;
        int hi = d != 0 ? qround((x[j + DS_QK / 2] - m) / d, 0, 15) : 0;
        b[4 + j] = (uint8_t)(lo | hi << 4);
    }
}

int ds_ggml_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    uint8_t *d = dst;
    switch (type) {
    case DS_GGML_F32: memcpy(d, src, (size_t)n * 4); return 0;
    case DS_GGML_F16:
        for (int64_t i = 0; i < n; i++) put16(d + 2 * i, ds_fp32_to_fp16(src[i]));
        return 0;
    case DS_GGML_Q8_0: case DS_GGML_Q4_0: case DS_GGML_Q4_1: break;
    default: return -1;
    }
    if (n % DS_QK) return -1;
    /* scales and minimums are fp16: larger (or non-finite) values have no block encoding */
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(src[i]) <= FP16_MAX)) return -1;
    size_t bytes = ds_ggml_type_size(type);
    for (int64_t b = 0; b < n / DS_QK; b++, src += DS_QK, d += bytes) {
        if (type == DS_GGML_Q8_0) quantize_q8_0(src, d);
        else if (type == DS_GGML_Q4_0) quantize_q4_0(src, d);
        else quantize_q4_1(src, d);
    }
    return 0;
}

/* ==== the writer ============================================================================= */

static char *copy_str(const char *s) { /* strdup, which -std=c11 does not declare */
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}
static void put_u32(bytes *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(bytes *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(bytes *b, const char *s) {
    size_t n = strlen(s);
    put_u64(b, n);
    put(b, s, n);
}
static void put_zeros(bytes *b, size_t n) {
    static const uint8_t zero[64];
    while (n) {
        size_t k = n < sizeof zero ? n : sizeof zero;
        put(b, zero, k);
        n -= k;
    }
}

typedef struct {
    char name[DS_GGUF_MAX_NAME + 1];
    uint32_t type;
    int n_dims;
    int64_t ne[DS_GGUF_MAX_DIMS];
    uint8_t *data;
    size_t nbytes;
} wtensor;

struct ds_gguf_writer {
    uint32_t alignment;
    bytes kv;        /* the encoded metadata entries */
    int64_t n_kv;
    char **keys;
    wtensor *t;
    int64_t n_t, cap_t;
    char err[256];
};

static int werr(ds_gguf_writer *w, const char *fmt, ...) {
    if (!w->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof w->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *ds_gguf_writer_error(const ds_gguf_writer *w) { return w->err[0] ? w->err : NULL; }

void ds_gguf_writer_free(ds_gguf_writer *w) {
    if (!w) return;
    free(w->kv.p);
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (int64_t i = 0; i < w->n_t; i++) free(w->t[i].data);
    free(w->t);
    free(w);
}

/* Starts an entry: checks and records the key, writes it and the value type. */
static int begin_kv(ds_gguf_writer *w, const char *key, uint32_t type, int internal) {
    if (w->err[0]) return -1;
    if (!key || !key[0] || strlen(key) > DS_GGUF_MAX_KEY) return werr(w, "bad metadata key");
    if (!internal && strcmp(key, "general.alignment") == 0)
        return werr(w, "general.alignment is set through ds_gguf_writer_new");
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return werr(w, "duplicate metadata key '%s'", key);
    char **k = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *k);
    if (!k) return werr(w, "out of memory");
    w->keys = k;
    if (!(k[w->n_kv] = copy_str(key))) return werr(w, "out of memory");
    w->n_kv++;
    put_str(&w->kv, key);
    put_u32(&w->kv, type);
    return 0;
}

static int end_kv(ds_gguf_writer *w) { return w->kv.oom ? werr(w, "out of memory") : 0; }

ds_gguf_writer *ds_gguf_writer_new(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1))) return NULL;
    ds_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    if (alignment != DS_GGUF_DEFAULT_ALIGNMENT) {
        begin_kv(w, "general.alignment", DS_GGUF_U32, 1);
        put_u32(&w->kv, alignment);
        if (end_kv(w) != 0) {
            ds_gguf_writer_free(w);
            return NULL;
        }
    }
    return w;
}

/* bytes of each scalar value type (0: string, array) */
static const uint8_t value_size[DS_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static int add_scalar(ds_gguf_writer *w, const char *key, uint32_t type, uint64_t bits) {
    if (begin_kv(w, key, type, 0) != 0) return -1;
    for (int k = 0; k < value_size[type]; k++) {
        uint8_t byte = (uint8_t)(bits >> (8 * k));
        put(&w->kv, &byte, 1);
    }
    return end_kv(w);
}

int ds_gguf_add_u8(ds_gguf_writer *w, const char *k, uint8_t v) { return add_scalar(w, k, DS_GGUF_U8, v); }
int ds_gguf_add_i8(ds_gguf_writer *w, const char *k, int8_t v) { return add_scalar(w, k, DS_GGUF_I8, (uint8_t)v); }
int ds_gguf_add_u16(ds_gguf_writer *w, const char *k, uint16_t v) { return add_scalar(w, k, DS_GGUF_U16, v); }
int ds_gguf_add_i16(ds_gguf_writer *w, const char *k, int16_t v) { return add_scalar(w, k, DS_GGUF_I16, (uint16_t)v); }
int ds_gguf_add_u32(ds_gguf_writer *w, const char *k, uint32_t v) { return add_scalar(w, k, DS_GGUF_U32, v); }
int ds_gguf_add_i32(ds_gguf_writer *w, const char *k, int32_t v) { return add_scalar(w, k, DS_GGUF_I32, (uint32_t)v); }
int ds_gguf_add_u64(ds_gguf_writer *w, const char *k, uint64_t v) { return add_scalar(w, k, DS_GGUF_U64, v); }
int ds_gguf_add_i64(ds_gguf_writer *w, const char *k, int64_t v) { return add_scalar(w, k, DS_GGUF_I64, (uint64_t)v); }
int ds_gguf_add_bool(ds_gguf_writer *w, const char *k, bool v) { return add_scalar(w, k, DS_GGUF_BOOL, v ? 1 : 0); }
int ds_gguf_add_f32(ds_gguf_writer *w, const char *k, float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return add_scalar(w, k, DS_GGUF_F32, b);
}
int ds_gguf_add_f64(ds_gguf_writer *w, const char *k, double v) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return add_scalar(w, k, DS_GGUF_F64, b);
}
int ds_gguf_add_str(ds_gguf_writer *w, const char *key, const char *v) {
    if (begin_kv(w, key, DS_GGUF_STRING, 0) != 0) return -1;
    put_str(&w->kv, v);
    return end_kv(w);
}

int ds_gguf_add_arr(ds_gguf_writer *w, const char *key, uint32_t et, const void *values, uint64_t count) {
    if (et >= DS_GGUF_NTYPES || !value_size[et]) return werr(w, "'%s': ds_gguf_add_arr takes numeric or bool elements", key);
    if (begin_kv(w, key, DS_GGUF_ARRAY, 0) != 0) return -1;
    put_u32(&w->kv, et);
    put_u64(&w->kv, count);
    /* the C arrays hold the same little-endian layout the file wants */
    put(&w->kv, values, (size_t)count * value_size[et]);
    return end_kv(w);
}

int ds_gguf_add_arr_str(ds_gguf_writer *w, const char *key, const char *const *values, uint64_t count) {
    if (begin_kv(w, key, DS_GGUF_ARRAY, 0) != 0) return -1;
    put_u32(&w->kv, DS_GGUF_STRING);
    put_u64(&w->kv, count);
    for (uint64_t i = 0; i < count; i++) put_str(&w->kv, values[i]);
    return end_kv(w);
}

/* Checks a tensor's name and shape and reserves its slot; NULL after an error. */
static wtensor *new_tensor(ds_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    if (w->err[0]) return NULL;
    if (!name || !name[0] || strlen(name) > DS_GGUF_MAX_NAME) {
        werr(w, "tensor name '%s' is empty or longer than %d bytes", name ? name : "", DS_GGUF_MAX_NAME);
        return NULL;
    }
    if (!ds_ggml_type_name(type)) {
        werr(w, "tensor '%s': unknown type %" PRIu32, name, type);
        return NULL;
    }
    if (n_dims < 1 || n_dims > DS_GGUF_MAX_DIMS) {
        werr(w, "tensor '%s': %d dimensions", name, n_dims);
        return NULL;
    }
    int64_t nel = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1 || ne[d] > INT64_MAX / nel) {
            werr(w, "tensor '%s': bad dimension %d", name, d);
            return NULL;
        }
        nel *= ne[d];
    }
    if (ne[0] % ds_ggml_block_size(type)) {
        werr(w, "tensor '%s': ne[0] = %" PRId64 " is not a multiple of the %s block size", name, ne[0], ds_ggml_type_name(type));
        return NULL;
    }
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            werr(w, "duplicate tensor name '%s'", name);
            return NULL;
        }
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) {
            werr(w, "out of memory");
            return NULL;
        }
        w->t = t, w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < DS_GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = ds_ggml_row_bytes(type, ne[0]) * (size_t)(nel / ne[0]);
    if (!(t->data = malloc(t->nbytes ? t->nbytes : 1))) {
        werr(w, "out of memory");
        return NULL;
    }
    w->n_t++;
    return t;
}

int ds_gguf_add_tensor(ds_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                       const float *data) {
    if (!w->err[0] && !ds_ggml_can_dequantize(type))
        return werr(w, "tensor '%s': the writer quantises to F32, F16, Q8_0, Q4_0 and Q4_1 only", name);
    wtensor *t = new_tensor(w, name, type, n_dims, ne);
    if (!t) return -1;
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (ds_ggml_quantize_row(type, data, t->data, rows * t->ne[0]) != 0)
        return werr(w, "tensor '%s': values beyond the fp16 range (or not finite) cannot be quantised to %s", name,
                    ds_ggml_type_name(type));
    return 0;
}

int ds_gguf_add_tensor_raw(ds_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *bytes) {
    wtensor *t = new_tensor(w, name, type, n_dims, ne);
    if (!t) return -1;
    memcpy(t->data, bytes, t->nbytes);
    return 0;
}

static size_t pad_to(size_t n, uint32_t a) { return (a - n % a) % a; }

int ds_gguf_writer_to_memory(const ds_gguf_writer *w, uint8_t **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    if (w->err[0]) {
        snprintf(err, errlen, "%s", w->err);
        return -1;
    }
    bytes b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)w->n_t);
    put_u64(&b, (uint64_t)w->n_kv);
    put(&b, w->kv.p, w->kv.len);
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(&b, t->name);
        put_u32(&b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&b, (uint64_t)t->ne[d]);
        put_u32(&b, t->type);
        put_u64(&b, offset);
        offset += t->nbytes + pad_to(t->nbytes, w->alignment);
    }
    put_zeros(&b, pad_to(b.len, w->alignment));
    for (int64_t i = 0; i < w->n_t; i++) {
        put(&b, w->t[i].data, w->t[i].nbytes);
        put_zeros(&b, pad_to(w->t[i].nbytes, w->alignment));
    }
    if (b.oom) {
        free(b.p);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}

int ds_gguf_writer_save(const ds_gguf_writer *w, const char *path, char *err, size_t errlen) {
    uint8_t *buf;
    size_t len;
    char why[300];
    if (ds_gguf_writer_to_memory(w, &buf, &len, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    free(buf);
    if (!ok) {
        snprintf(err, errlen, "%s: cannot write the file", path);
        return -1;
    }
    return 0;
}

/* ==== the tiny llama ========================================================================= */

uint64_t ds_tiny_llama_tensor_id(int layer, int kind) { return (uint64_t)(layer + 1) * DS_TINY_NKINDS + (uint64_t)kind; }

uint32_t ds_tiny_llama_attn_type(int layer) {
    static const uint32_t types[4] = {DS_GGML_Q4_1, DS_GGML_Q4_0, DS_GGML_Q8_0, DS_GGML_F16};
    return types[layer % 4];
}

float ds_tiny_llama_weight(uint64_t seed, int layer, int kind, int64_t fan_in, int64_t index) {
    uint64_t id = ds_tiny_llama_tensor_id(layer, kind);
    if (kind == DS_TINY_ATTN_NORM || kind == DS_TINY_FFN_NORM || kind == DS_TINY_OUTPUT_NORM)
        return 1.0f + pl_rng_value(seed, id, (uint64_t)index, PL_RNG_UNIFORM, -0.1f, 0.1f);
    return pl_rng_value(seed, id, (uint64_t)index, PL_RNG_NORMAL, 0.0f, 1.0f / sqrtf((float)fan_in));
}

/* Merges in rank order, byte-level spelled ("Ġ" is a space, "Ċ" a newline): each one's
 * halves are byte tokens or earlier merges. */
static const char *const tiny_merges[] = {
    "Ġ t", "h e", "i n", "Ġ a", "Ġt he", "e r", "o n", "Ġ s", "r e", "a t", "Ġ w", "o u", "e n", "Ġ c", "i s",
    "Ġ o", "a n", "e s", "Ġ b", "o r", "Ġ f", "Ġ m", "l l", "Ġ h", "in g", "n d", "Ġa nd", "Ġ i", "Ġi n", "Ġ p",
    "Ġ d", "Ġ Ġ", "Ġc at", "Ġh at", "Ġ l", "l o", "Ġw or", "Ġwor l", "Ġworl d", "H e", "He ll", "Hell o", "Ċ Ċ",
};
#define TINY_N_MERGES (int)(sizeof tiny_merges / sizeof tiny_merges[0])
static const char *const tiny_control[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
#define TINY_N_CONTROL 3

int ds_tiny_llama_vocab(void) { return TINY_N_CONTROL + 256 + TINY_N_MERGES; }

/* The GPT-2 byte-to-character map: printable Latin-1 bytes stand for themselves, the others
 * (controls, space, 127-160, 173) for 256, 257, ... in byte order. */
static int byte_char(int byte) {
    if ((byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255)) return byte;
    int k = 0;
    for (int b = 0; b < byte; b++)
        if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) k++;
    return 256 + k;
}

static void utf8(int cp, char *out) {
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), out[2] = 0; /* all < 0x800 here */
}

static void add_tiny_tokenizer(ds_gguf_writer *w) {
    int n = ds_tiny_llama_vocab();
    char **tok = calloc((size_t)n, sizeof *tok);
    int32_t *type = calloc((size_t)n, sizeof *type);
    bool ok = false;
    if (!tok || !type) goto done;
    for (int i = 0; i < TINY_N_CONTROL; i++) tok[i] = copy_str(tiny_control[i]), type[i] = 3; /* control */
    for (int b = 0; b < 256; b++) {
        char s[4];
        utf8(byte_char(b), s);
        tok[TINY_N_CONTROL + b] = copy_str(s);
        type[TINY_N_CONTROL + b] = 1; /* normal */
    }
    for (int m = 0; m < TINY_N_MERGES; m++) { /* a merged token is its two halves, glued */
        const char *sp = strchr(tiny_merges[m], ' ');
        char *s = malloc(strlen(tiny_merges[m]));
        if (s) {
            memcpy(s, tiny_merges[m], (size_t)(sp - tiny_merges[m]));
            strcpy(s + (sp - tiny_merges[m]), sp + 1);
        }
        tok[TINY_N_CONTROL + 256 + m] = s;
        type[TINY_N_CONTROL + 256 + m] = 1;
    }
    for (int i = 0; i < n; i++)
        if (!tok[i]) goto done;
    ds_gguf_add_str(w, "tokenizer.ggml.model", "gpt2");
    ds_gguf_add_str(w, "tokenizer.ggml.pre", "smollm");
    ds_gguf_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)n);
    ds_gguf_add_arr(w, "tokenizer.ggml.token_type", DS_GGUF_I32, type, (uint64_t)n);
    ds_gguf_add_arr_str(w, "tokenizer.ggml.merges", tiny_merges, TINY_N_MERGES);
    ds_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    ds_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    ds_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    ds_gguf_add_u32(w, "tokenizer.ggml.padding_token_id", 2);
    ds_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", false);
    ok = true;
done:
    if (!ok) werr(w, "out of memory");
    if (tok)
        for (int i = 0; i < n; i++) free(tok[i]);
    free(tok);
    free(type);
}

/* One weight tensor from the RNG: ne = {ne0, ne1}, fan-in ne0. */
static int add_tiny_tensor(ds_gguf_writer *w, uint64_t seed, int layer, int kind, const char *name, uint32_t type,
                           int64_t ne0, int64_t ne1) {
    int64_t n = ne0 * ne1, ne[2] = {ne0, ne1};
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) return werr(w, "out of memory");
    for (int64_t i = 0; i < n; i++) x[i] = ds_tiny_llama_weight(seed, layer, kind, ne0, i);
    int rc = ds_gguf_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, x);
    free(x);
    return rc;
}

int ds_tiny_llama_write(const char *path, uint64_t seed, const ds_llama_config *shape, bool with_output, char *err,
                        size_t errlen) {
    ds_llama_config c = {.n_layer = DS_TINY_N_LAYER, .n_embd = DS_TINY_N_EMBD, .n_ff = DS_TINY_N_FF,
                         .n_head = DS_TINY_N_HEAD, .n_head_kv = DS_TINY_N_HEAD_KV, .n_ctx = DS_TINY_N_CTX,
                         .rope_freq_base = DS_TINY_ROPE_BASE, .rms_eps = DS_TINY_RMS_EPS};
    if (shape) {
        c = *shape;
        c.n_vocab = 0;
    }
    if (c.n_layer < 1 || c.n_embd < DS_QK || c.n_embd % DS_QK || c.n_ff < DS_QK || c.n_ff % DS_QK || c.n_head < 1 ||
        c.n_head_kv < 1 || c.n_embd % c.n_head || c.n_head % c.n_head_kv || (c.n_embd / c.n_head) % 2 || c.n_ctx < 1 ||
        !(c.rope_freq_base > 0) || !(c.rms_eps > 0)) {
        snprintf(err, errlen, "%s: bad tiny llama shape (n_embd and n_ff multiples of 32, heads dividing n_embd into an "
                 "even head size, KV heads dividing heads)", path);
        return -1;
    }
    c.n_vocab = ds_tiny_llama_vocab();
    c.head_dim = c.n_embd / c.n_head;
    ds_gguf_writer *w = ds_gguf_writer_new(DS_GGUF_DEFAULT_ALIGNMENT);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    ds_gguf_add_str(w, "general.architecture", "llama");
    ds_gguf_add_str(w, "general.name", "ParaLab tiny llama");
    ds_gguf_add_u64(w, "paralab.seed", seed);
    ds_gguf_add_u32(w, "llama.block_count", (uint32_t)c.n_layer);
    ds_gguf_add_u32(w, "llama.context_length", (uint32_t)c.n_ctx);
    ds_gguf_add_u32(w, "llama.embedding_length", (uint32_t)c.n_embd);
    ds_gguf_add_u32(w, "llama.feed_forward_length", (uint32_t)c.n_ff);
    ds_gguf_add_u32(w, "llama.attention.head_count", (uint32_t)c.n_head);
    ds_gguf_add_u32(w, "llama.attention.head_count_kv", (uint32_t)c.n_head_kv);
    ds_gguf_add_f32(w, "llama.rope.freq_base", c.rope_freq_base);
    ds_gguf_add_f32(w, "llama.attention.layer_norm_rms_epsilon", c.rms_eps);
    ds_gguf_add_u32(w, "llama.vocab_size", (uint32_t)c.n_vocab);
    ds_gguf_add_u32(w, "llama.rope.dimension_count", (uint32_t)c.head_dim);
    add_tiny_tokenizer(w);

    int64_t E = c.n_embd, KV = (int64_t)c.n_head_kv * c.head_dim, F = c.n_ff, V = c.n_vocab;
    add_tiny_tensor(w, seed, -1, DS_TINY_TOKEN_EMBD, "token_embd.weight", DS_GGML_Q8_0, E, V);
    static const struct {
        int kind;
        const char *name;
    } parts[9] = {{DS_TINY_ATTN_NORM, "attn_norm"}, {DS_TINY_ATTN_Q, "attn_q"},     {DS_TINY_ATTN_K, "attn_k"},
                  {DS_TINY_ATTN_V, "attn_v"},       {DS_TINY_ATTN_OUTPUT, "attn_output"}, {DS_TINY_FFN_NORM, "ffn_norm"},
                  {DS_TINY_FFN_GATE, "ffn_gate"},   {DS_TINY_FFN_UP, "ffn_up"},   {DS_TINY_FFN_DOWN, "ffn_down"}};
    for (int l = 0; l < c.n_layer; l++)
        for (int p = 0; p < 9; p++) {
            char name[DS_GGUF_MAX_NAME + 1];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[p].name);
            int k = parts[p].kind;
            int64_t ne0 = k == DS_TINY_FFN_DOWN ? F : E;
            int64_t ne1 = k == DS_TINY_ATTN_NORM || k == DS_TINY_FFN_NORM ? 1
                          : k == DS_TINY_ATTN_K || k == DS_TINY_ATTN_V  ? KV
                          : k == DS_TINY_FFN_GATE || k == DS_TINY_FFN_UP ? F
                                                                          : E;
            uint32_t type = ne1 == 1                                    ? DS_GGML_F32
                            : k == DS_TINY_FFN_GATE || k == DS_TINY_FFN_UP ? DS_GGML_Q8_0
                            : k == DS_TINY_FFN_DOWN                     ? DS_GGML_Q4_1
                                                                        : ds_tiny_llama_attn_type(l);
            add_tiny_tensor(w, seed, l, k, name, type, ne0, ne1);
        }
    add_tiny_tensor(w, seed, -1, DS_TINY_OUTPUT_NORM, "output_norm.weight", DS_GGML_F32, E, 1);
    if (with_output) add_tiny_tensor(w, seed, -1, DS_TINY_OUTPUT, "output.weight", DS_GGML_F16, E, V);
    int rc = ds_gguf_writer_save(w, path, err, errlen);
    ds_gguf_writer_free(w);
    return rc;
}
