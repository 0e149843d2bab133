/* ds_gguf.c - the GGUF reader: validation, metadata getters, tensors, dequantisation, the
 * llama config. libc (and POSIX mmap) only, so the libFuzzer target links it without MPI. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L // defines: mmap, fstat, open under -std=c11
#endif
#include "ds_gguf.h"

#include <errno.h>
#include <fcntl.h>    // defines: open
#include <inttypes.h> // defines: PRIu64, PRId64
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> // defines: mmap, munmap
#include <sys/stat.h> // defines: fstat
#include <unistd.h>   // defines: close

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ds_gguf.c copies little-endian tensor data straight into floats: a little-endian host is required"
#endif

/* ==== types ================================================================================ */

static const char *const value_type_names[DS_GGUF_NTYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
/* bytes of a scalar value type; 0 for string and array */
static const uint8_t value_type_size[DS_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *ds_gguf_type_name(uint32_t type) { return type < DS_GGUF_NTYPES ? value_type_names[type] : "?"; }

/* Every fixed-size ggml type, with its block size and block bytes (as ggml defines them), so
 * that any GGUF file can be validated even when only some types can be dequantised. */
typedef struct {
    uint32_t id;
    const char *name;
    int64_t block;
    size_t bytes;
} ggml_type_info;

static const ggml_type_info ggml_types[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},       {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},       {8, "Q8_0", 32, 34},       {9, "Q8_1", 32, 40},
    {10, "Q2_K", 256, 84},     {11, "Q3_K", 256, 110},    {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},    {15, "Q8_K", 256, 292},    {16, "IQ2_XXS", 256, 66},  {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},    {20, "IQ4_NL", 32, 18},    {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},    {23, "IQ4_XS", 256, 136},  {24, "I8", 1, 1},          {25, "I16", 1, 2},
    {26, "I32", 1, 4},         {27, "I64", 1, 8},         {28, "F64", 1, 8},         {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},    {35, "TQ2_0", 256, 66},    {39, "MXFP4", 32, 17},
};

static const ggml_type_info *type_info(uint32_t type) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == type) return &ggml_types[i];
    return NULL;
}

const char *ds_ggml_type_name(uint32_t type) {
    const ggml_type_info *t = type_info(type);
    return t ? t->name : NULL;
}
int64_t ds_ggml_block_size(uint32_t type) {
    const ggml_type_info *t = type_info(type);
    return t ? t->block : 0;
}
size_t ds_ggml_type_size(uint32_t type) {
    const ggml_type_info *t = type_info(type);
    return t ? t->bytes : 0;
}
size_t ds_ggml_row_bytes(uint32_t type, int64_t n) {
    const ggml_type_info *t = type_info(type);
    return t ? (size_t)(n / t->block) * t->bytes : 0;
}
bool ds_ggml_can_dequantize(uint32_t type) {
    return type == DS_GGML_F32 || type == DS_GGML_F16 || type == DS_GGML_Q8_0 || type == DS_GGML_Q4_0 ||
           type == DS_GGML_Q4_1;
}

/* ==== half precision ======================================================================== */

float ds_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | (mant << 13); /* inf, or a NaN keeping its payload */
    else
        bits = sign | ((exp + 112) << 23) | (mant << 13); /* rebias 15 -> 127 */
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ds_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff) /* inf stays inf; a NaN stays a (quiet) NaN */
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    int e = (int)exp - 127 + 15; /* the half exponent, before rounding */
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        /* subnormal half (or zero): the value is m * 2^-24 with m = full mantissa >> shift */
        if (e < -10) return sign; /* below half the smallest subnormal: rounds to zero */
        uint32_t full = mant | 0x800000;
        int shift = 14 - e; /* 14..24 */
        uint32_t m = full >> shift, rest = full & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (m & 1))) m++; /* may carry into the smallest normal: fine */
        return (uint16_t)(sign | m);
    }
    uint32_t m = mant >> 13, rest = mant & 0x1fff;
    uint32_t h = ((uint32_t)e << 10) | m;
    if (rest > 0x1000 || (rest == 0x1000 && (m & 1))) h++; /* a carry may reach the exponent, up to inf */
    return (uint16_t)(sign | h);
}

/* ==== little-endian reads (the data needs no alignment) ===================================== */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ==== dequantisation ========================================================================= */

int ds_ggml_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    switch (type) {
    case DS_GGML_F32: memcpy(dst, s, (size_t)n * 4); return 0;
    case DS_GGML_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = ds_fp16_to_fp32(rd16(s + 2 * i));
        return 0;
    case DS_GGML_Q8_0: /* d, then 32 signed bytes: y = q d */
        for (int64_t b = 0; b < n / DS_QK; b++, s += 34, dst += DS_QK) {
            float d = ds_fp16_to_fp32(rd16(s));
            for (int j = 0; j < DS_QK; j++) dst[j] = (float)(int8_t)s[2 + j] * d;
        }
        return 0;
    case DS_GGML_Q4_0: /* d, then 16 bytes: element j in the low nibble, j + 16 in the high one */
        for (int64_t b = 0; b < n / DS_QK; b++, s += 18, dst += DS_QK) {
            float d = ds_fp16_to_fp32(rd16(s));
            for (int j = 0; j < DS_QK / 2; j++) {
                dst[j] = (float)((s[2 + j] & 15) - 8) * d;
                dst[j + DS_QK / 2] = (float)((s[2 + j] >> 4) - 8) * d;
            }
        }
        return 0;
    case DS_GGML_Q4_1: /* d, m, then 16 bytes as in Q4_0: y = q d + m */
        for (int64_t b = 0; b < n / DS_QK; b++, s += 20, dst += DS_QK) {
            float d = ds_fp16_to_fp32(rd16(s)), m = ds_fp16_to_fp32(rd16(s + 2));
            for (int j = 0; j < DS_QK / 2; j++) {
                dst[j] = (float)(s[4 + j] & 15) * d + m;
                dst[j + DS_QK / 2] = (float)(s[4 + j] >> 4) * d + m;
            }
        }
        return 0;
    }
    return -1;
}

/* ==== the handle ============================================================================= */

struct ds_gguf {
    char *name;
    const uint8_t *base;
    size_t size;
    void *map; /* the mapping ds_gguf_open made (NULL for a caller's buffer) */
    size_t map_len;
    uint32_t version, alignment;
    size_t data_off;
    int64_t n_kv, n_tensors;
    ds_gguf_kv *kv;
    ds_gguf_tensor *tensors;
    char *names;                   /* the tensor names, NUL-terminated, one block            */
    int64_t *kv_slots, *t_slots;   /* open-addressing tables of index + 1, 0 = empty         */
    size_t kv_cap, t_cap;          /* slots in each (powers of two)                          */
};

static void put_err(char *err, size_t errlen, const char *name, const char *fmt, va_list ap) {
    if (!err || !errlen) return;
    int n = snprintf(err, errlen, "%s: ", name);
    if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    for (char *p = err; *p; p++) /* one line, whatever a key or name contained */
        if (*p == '\n' || *p == '\r') *p = ' ';
}

static bool failf(char *err, size_t errlen, const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    put_err(err, errlen, name, fmt, ap);
    va_end(ap);
    return false;
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static size_t table_cap(int64_t n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    return cap;
}

/* The slot holding `key`, or the empty slot where it would go. */
static size_t slot_of(const int64_t *slots, size_t cap, const char *key, const char *(*key_at)(const ds_gguf *, int64_t),
                      const ds_gguf *g) {
    size_t i = (size_t)hash_bytes(key, strlen(key)) & (cap - 1);
    while (slots[i] && strcmp(key_at(g, slots[i] - 1), key) != 0) i = (i + 1) & (cap - 1);
    return i;
}
static const char *kv_key_at(const ds_gguf *g, int64_t i) { return g->kv[i].key; }
static const char *tensor_name_at(const ds_gguf *g, int64_t i) { return g->tensors[i].name; }

void ds_gguf_close(ds_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free((char *)g->kv[i].key);
        free((uint64_t *)g->kv[i].str_off);
    }
    free(g->kv);
    free(g->tensors);
    free(g->names);
    free(g->kv_slots);
    free(g->t_slots);
    if (g->map) munmap(g->map, g->map_len);
    free(g->name);
    free(g);
}

/* ==== parsing ================================================================================ */

/* A cursor over the file, plus what is being read: the subject of every message, which is a
 * predicate ("tensor 'x' has 5 dimensions ..."). */
typedef struct {
    ds_gguf *g;
    size_t pos;
    char where[200]; /* "metadata 'general.name'", "tensor 'x'", ...; "" for the header */
    char *err;
    size_t errlen;
} cursor;

static bool fail(cursor *c, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->where[0])
        return failf(c->err, c->errlen, c->g->name, "%s %s", c->where, msg);
    return failf(c->err, c->errlen, c->g->name, "%s", msg);
}

static size_t left(const cursor *c) { return c->g->size - c->pos; }

static bool need(cursor *c, uint64_t n, const char *what) {
    if (n <= left(c)) return true;
    return fail(c, "%s: %s needs %" PRIu64 " byte(s) at offset %zu, the file ends at %zu",
                c->where[0] ? "is cut off" : "truncated header", what, n, c->pos, c->g->size);
}

static bool get_u32(cursor *c, uint32_t *v, const char *what) {
    if (!need(c, 4, what)) return false;
    *v = rd32(c->g->base + c->pos);
    c->pos += 4;
    return true;
}
static bool get_u64(cursor *c, uint64_t *v, const char *what) {
    if (!need(c, 8, what)) return false;
    *v = rd64(c->g->base + c->pos);
    c->pos += 8;
    return true;
}

/* A string: its length, then that many bytes, which stay in the file. */
static bool get_str(cursor *c, ds_gguf_str *s, const char *what) {
    uint64_t len;
    char w[80];
    snprintf(w, sizeof w, "the length of %s", what);
    if (!get_u64(c, &len, w)) return false;
    if (len > left(c))
        return fail(c, "has %s of %" PRIu64 " bytes but only %zu byte(s) are left in the file", what, len, left(c));
    s->ptr = (const char *)c->g->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return true;
}

/* An array's body after its element type and count. depth: 1 for a metadata value. */
static bool read_array(cursor *c, uint32_t etype, uint64_t count, int depth, uint64_t **str_off) {
    const uint8_t *start = c->g->base + c->pos;
    if (etype >= DS_GGUF_NTYPES) return fail(c, "has an array of unknown value type %" PRIu32, etype);
    if (etype == DS_GGUF_ARRAY && depth >= DS_GGUF_MAX_ARRAY_DEPTH)
        return fail(c, "has arrays nested more than %d deep", DS_GGUF_MAX_ARRAY_DEPTH);
    /* the smallest element: a scalar's size, 8 bytes of string length, 12 of array header */
    uint64_t min = etype == DS_GGUF_STRING ? 8 : etype == DS_GGUF_ARRAY ? 12 : value_type_size[etype];
    if (count > left(c) / min)
        return fail(c, "holds an array of %" PRIu64 " %s that needs at least %" PRIu64 " bytes but only %zu are left in the file", count,
                    ds_gguf_type_name(etype), count > UINT64_MAX / min ? UINT64_MAX : count * min, left(c));
    if (etype == DS_GGUF_BOOL) {
        for (uint64_t i = 0; i < count; i++)
            if (start[i] > 1) return fail(c, "has bool element %" PRIu64 " = %u (0 or 1 expected)", i, start[i]);
    }
    if (etype != DS_GGUF_STRING && etype != DS_GGUF_ARRAY) {
        c->pos += (size_t)(count * min);
        return true;
    }
    uint64_t *off = NULL;
    if (etype == DS_GGUF_STRING && str_off) {
        off = malloc((size_t)(count ? count : 1) * sizeof *off);
        if (!off) return fail(c, "cannot be held: out of memory for %" PRIu64 " strings", count);
    }
    for (uint64_t i = 0; i < count; i++) {
        char what[64];
        if (etype == DS_GGUF_STRING) {
            ds_gguf_str s;
            if (off) off[i] = (uint64_t)(c->g->base + c->pos - start);
            snprintf(what, sizeof what, "string element %" PRIu64, i);
            if (!get_str(c, &s, what)) {
                free(off);
                return false;
            }
        } else {
            uint32_t t;
            uint64_t n;
            snprintf(what, sizeof what, "the header of array element %" PRIu64, i);
            if (!get_u32(c, &t, what) || !get_u64(c, &n, what) || !read_array(c, t, n, depth + 1, NULL)) return false;
        }
    }
    if (str_off) *str_off = off;
    return true;
}

static bool read_kv(cursor *c, int64_t i, ds_gguf_kv *kv) {
    ds_gguf *g = c->g;
    ds_gguf_str key;
    snprintf(c->where, sizeof c->where, "metadata entry %" PRId64 " of %" PRId64, i, g->n_kv);
    if (!get_str(c, &key, "a key")) return false;
    if (key.len == 0) return fail(c, "has an empty key");
    if (key.len > DS_GGUF_MAX_KEY) return fail(c, "has a key of %" PRIu64 " bytes (at most %d allowed)", key.len, DS_GGUF_MAX_KEY);
    if (memchr(key.ptr, 0, (size_t)key.len)) return fail(c, "has a key containing a NUL byte");
    char *k = malloc((size_t)key.len + 1);
    if (!k) return fail(c, "cannot be held: out of memory");
    memcpy(k, key.ptr, (size_t)key.len);
    k[key.len] = 0;
    kv->key = k;
    snprintf(c->where, sizeof c->where, "metadata '%.120s'", k);
    uint32_t type;
    if (!get_u32(c, &type, "its value type")) return false;
    if (type >= DS_GGUF_NTYPES) return fail(c, "has unknown value type %" PRIu32, type);
    kv->type = type;
    kv->count = 1;
    if (type == DS_GGUF_STRING) {
        ds_gguf_str s;
        if (!get_str(c, &s, "a string value")) return false;
        kv->data = (const uint8_t *)s.ptr;
        kv->count = s.len;
    } else if (type == DS_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (!get_u32(c, &et, "its array element type") || !get_u64(c, &n, "its array count")) return false;
        kv->arr_type = et;
        kv->count = n;
        kv->data = g->base + c->pos;
        uint64_t *off = NULL;
        if (!read_array(c, et, n, 1, &off)) return false;
        kv->str_off = off;
    } else {
        if (!need(c, value_type_size[type], "its value")) return false;
        kv->data = g->base + c->pos;
        if (type == DS_GGUF_BOOL && kv->data[0] > 1) return fail(c, "has bool value %u (0 or 1 expected)", kv->data[0]);
        c->pos += value_type_size[type];
    }
    size_t s = slot_of(g->kv_slots, g->kv_cap, k, kv_key_at, g);
    if (g->kv_slots[s]) return fail(c, "appears twice (metadata entries %" PRId64 " and %" PRId64 ")", g->kv_slots[s] - 1, i);
    g->kv_slots[s] = i + 1;
    return true;
}

static bool read_tensor_info(cursor *c, int64_t i, ds_gguf_tensor *t, char *name_buf) {
    ds_gguf *g = c->g;
    ds_gguf_str name;
    snprintf(c->where, sizeof c->where, "tensor info %" PRId64 " of %" PRId64, i, g->n_tensors);
    if (!get_str(c, &name, "a name")) return false;
    if (name.len == 0) return fail(c, "has an empty name");
    if (name.len > DS_GGUF_MAX_NAME)
        return fail(c, "has a name of %" PRIu64 " bytes (the format allows at most %d)", name.len, DS_GGUF_MAX_NAME);
    if (memchr(name.ptr, 0, (size_t)name.len)) return fail(c, "has a name containing a NUL byte");
    memcpy(name_buf, name.ptr, (size_t)name.len);
    name_buf[name.len] = 0;
    t->name = name_buf;
    t->source = g->name;
    snprintf(c->where, sizeof c->where, "tensor '%s'", name_buf);
    uint32_t n_dims, type;
    if (!get_u32(c, &n_dims, "its number of dimensions")) return false;
    if (n_dims < 1 || n_dims > DS_GGUF_MAX_DIMS)
        return fail(c, "has %" PRIu32 " dimensions (1 to %d allowed)", n_dims, DS_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < DS_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && !get_u64(c, &ne, "a dimension")) return false;
        if (ne == 0) return fail(c, "has dimension %d equal to 0", d);
        if (ne > (uint64_t)INT64_MAX || (int64_t)ne > INT64_MAX / nel)
            return fail(c, "has more elements than 64 bits count (dimension %d is %" PRIu64 ")", d, ne);
        t->ne[d] = (int64_t)ne;
        nel *= (int64_t)ne;
    }
    t->nelements = nel;
    t->nrows = nel / t->ne[0];
    if (!get_u32(c, &type, "its type")) return false;
    const ggml_type_info *ti = type_info(type);
    if (!ti) return fail(c, "has unknown type %" PRIu32, type);
    t->type = type;
    if (t->ne[0] % ti->block)
        return fail(c, "has ne[0] = %" PRId64 ", not a multiple of the %s block size %" PRId64, t->ne[0], ti->name, ti->block);
    t->row_bytes = (size_t)(t->ne[0] / ti->block) * ti->bytes;
    if ((uint64_t)t->nrows > SIZE_MAX / t->row_bytes) return fail(c, "is too large to address");
    t->nbytes = (size_t)t->nrows * t->row_bytes;
    if (!get_u64(c, &t->offset, "its data offset")) return false;
    if (t->offset % g->alignment)
        return fail(c, "has offset %" PRIu64 ", not a multiple of the alignment %" PRIu32, t->offset, g->alignment);
    size_t s = slot_of(g->t_slots, g->t_cap, name_buf, tensor_name_at, g);
    if (g->t_slots[s]) return fail(c, "appears twice (tensors %" PRId64 " and %" PRId64 ")", g->t_slots[s] - 1, i);
    g->t_slots[s] = i + 1;
    return true;
}

/* The smallest metadata entry: key length, a 1-byte key, value type, a u8 value. The
 * smallest tensor info: name length, a 1-byte name, n_dims, one dimension, type, offset. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)

static bool parse(cursor *c) {
    ds_gguf *g = c->g;
    c->where[0] = 0;
    if (g->size < 4) return fail(c, "not a GGUF file: %zu byte(s), shorter than the magic", g->size);
    if (memcmp(g->base, "GGUF", 4) != 0)
        return fail(c, "not a GGUF file: magic %02x %02x %02x %02x, expected \"GGUF\"", g->base[0], g->base[1],
                    g->base[2], g->base[3]);
    c->pos = 4;
    if (!get_u32(c, &g->version, "the version")) return false;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(c, "big-endian GGUF (version bytes %08" PRIx32 ") is not supported", g->version);
    if (g->version != 2 && g->version != 3) return fail(c, "unsupported GGUF version %" PRIu32 " (2 and 3 are read)", g->version);
    uint64_t nt, nkv;
    if (!get_u64(c, &nt, "the tensor count") || !get_u64(c, &nkv, "the metadata count")) return false;
    /* every entry takes a minimum of bytes, so a count the file cannot hold is refused before
     * anything is allocated for it */
    if (nkv > left(c) / MIN_KV_BYTES)
        return fail(c, "metadata count %" PRIu64 " is absurd: the %zu bytes after the header hold at most %zu entries", nkv,
                    left(c), left(c) / MIN_KV_BYTES);
    if (nt > left(c) / MIN_TENSOR_INFO_BYTES)
        return fail(c, "tensor count %" PRIu64 " is absurd: the %zu bytes after the header hold at most %zu tensor infos",
                    nt, left(c), left(c) / MIN_TENSOR_INFO_BYTES);
    g->n_kv = (int64_t)nkv;
    g->n_tensors = (int64_t)nt;
    g->kv_cap = table_cap(g->n_kv);
    g->t_cap = table_cap(g->n_tensors);
    g->kv = calloc((size_t)nkv + 1, sizeof *g->kv);
    g->kv_slots = calloc(g->kv_cap, sizeof *g->kv_slots);
    g->t_slots = calloc(g->t_cap, sizeof *g->t_slots);
    g->tensors = calloc((size_t)nt + 1, sizeof *g->tensors);
    g->names = malloc((size_t)nt * (DS_GGUF_MAX_NAME + 1) + 1);
    if (!g->kv || !g->kv_slots || !g->t_slots || !g->tensors || !g->names) return fail(c, "out of memory");

    for (int64_t i = 0; i < g->n_kv; i++)
        if (!read_kv(c, i, &g->kv[i])) return false;
    c->where[0] = 0;

    g->alignment = DS_GGUF_DEFAULT_ALIGNMENT;
    const ds_gguf_kv *al = ds_gguf_find_key(g, "general.alignment");
    if (al) {
        if (al->type != DS_GGUF_U32)
            return fail(c, "general.alignment is %s, expected u32", ds_gguf_type_name(al->type));
        uint32_t a = rd32(al->data);
        if (a == 0 || (a & (a - 1))) return fail(c, "general.alignment %" PRIu32 " is not a power of two", a);
        g->alignment = a;
    }

    for (int64_t i = 0; i < g->n_tensors; i++)
        if (!read_tensor_info(c, i, &g->tensors[i], g->names + (size_t)i * (DS_GGUF_MAX_NAME + 1))) return false;

    /* the data section starts at the next multiple of the alignment */
    size_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_off = c->pos + pad;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        ds_gguf_tensor *t = &g->tensors[i];
        snprintf(c->where, sizeof c->where, "tensor '%s'", t->name);
        if (g->data_off > g->size || t->offset > g->size - g->data_off ||
            t->nbytes > g->size - g->data_off - t->offset) {
            /* saturate: a fuzzed offset may not even fit beside the data section's start */
            uint64_t start = t->offset > UINT64_MAX - g->data_off ? UINT64_MAX : t->offset + g->data_off;
            uint64_t end = t->nbytes > UINT64_MAX - start ? UINT64_MAX : start + t->nbytes;
            return fail(c, "ends at byte %" PRIu64 " past the end of the file (%zu bytes)", end, g->size);
        }
        t->data = g->base + g->data_off + t->offset;
    }
    return true;
}

static ds_gguf *open_common(ds_gguf *g, char *err, size_t errlen) {
    cursor c = {.g = g, .err = err, .errlen = errlen};
    if (!parse(&c)) {
        ds_gguf_close(g);
        return NULL;
    }
    return g;
}

static ds_gguf *new_handle(const char *name, char *err, size_t errlen) {
    ds_gguf *g = calloc(1, sizeof *g);
    char *n = strdup(name ? name : "(memory)");
    if (!g || !n) {
        free(g);
        free(n);
        failf(err, errlen, name ? name : "(memory)", "out of memory");
        return NULL;
    }
    g->name = n;
    return g;
}

ds_gguf *ds_gguf_open_memory(const void *buf, size_t len, const char *name, char *err, size_t errlen) {
    ds_gguf *g = new_handle(name, err, errlen);
    if (!g) return NULL;
    g->base = buf;
    g->size = len;
    return open_common(g, err, errlen);
}

ds_gguf *ds_gguf_open(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        failf(err, errlen, path, "%s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        failf(err, errlen, path, "%s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        failf(err, errlen, path, "%s", S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        failf(err, errlen, path, "not a GGUF file: it is empty");
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping stays valid */
    if (map == MAP_FAILED) {
        failf(err, errlen, path, "cannot map %lld bytes: %s", (long long)st.st_size, strerror(e));
        return NULL;
    }
    ds_gguf *g = new_handle(path, err, errlen);
    if (!g) {
        munmap(map, (size_t)st.st_size);
        return NULL;
    }
    g->map = map;
    g->map_len = (size_t)st.st_size;
    g->base = map;
    g->size = (size_t)st.st_size;
    return open_common(g, err, errlen);
}

/* ==== accessors ============================================================================== */

const char *ds_gguf_name(const ds_gguf *g) { return g->name; }
uint32_t ds_gguf_version(const ds_gguf *g) { return g->version; }
uint32_t ds_gguf_alignment(const ds_gguf *g) { return g->alignment; }
size_t ds_gguf_data_offset(const ds_gguf *g) { return g->data_off; }
size_t ds_gguf_file_size(const ds_gguf *g) { return g->size; }
int64_t ds_gguf_n_kv(const ds_gguf *g) { return g->n_kv; }
const ds_gguf_kv *ds_gguf_kv_at(const ds_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL; }
int64_t ds_gguf_n_tensors(const ds_gguf *g) { return g->n_tensors; }
const ds_gguf_tensor *ds_gguf_tensor_at(const ds_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const ds_gguf_kv *ds_gguf_find_key(const ds_gguf *g, const char *key) {
    int64_t s = g->kv_slots[slot_of(g->kv_slots, g->kv_cap, key, kv_key_at, g)];
    return s ? &g->kv[s - 1] : NULL;
}

const ds_gguf_tensor *ds_gguf_find_tensor(const ds_gguf *g, const char *name) {
    int64_t s = g->t_slots[slot_of(g->t_slots, g->t_cap, name, tensor_name_at, g)];
    return s ? &g->tensors[s - 1] : NULL;
}

static const ds_gguf_kv *typed(const ds_gguf *g, const char *key, uint32_t type, char *err, size_t errlen) {
    const ds_gguf_kv *kv = ds_gguf_find_key(g, key);
    if (!kv) {
        failf(err, errlen, g->name, "key '%s' not found", key);
        return NULL;
    }
    if (kv->type != type) {
        failf(err, errlen, g->name, "key '%s' is %s%s%s, expected %s", key, ds_gguf_type_name(kv->type),
              kv->type == DS_GGUF_ARRAY ? " of " : "", kv->type == DS_GGUF_ARRAY ? ds_gguf_type_name(kv->arr_type) : "",
              ds_gguf_type_name(type));
        return NULL;
    }
    return kv;
}

#define SCALAR_GETTER(suffix, ctype, vtype, read)                                                            \
    bool ds_gguf_get_##suffix(const ds_gguf *g, const char *key, ctype *out, char *err, size_t errlen) {   \
        const ds_gguf_kv *kv = typed(g, key, vtype, err, errlen);                                          \
        if (!kv) return false;                                                                             \
        read;                                                                                              \
        return true;                                                                                       \
    }
SCALAR_GETTER(u8, uint8_t, DS_GGUF_U8, *out = kv->data[0])
SCALAR_GETTER(i8, int8_t, DS_GGUF_I8, *out = (int8_t)kv->data[0])
SCALAR_GETTER(u16, uint16_t, DS_GGUF_U16, *out = rd16(kv->data))
SCALAR_GETTER(i16, int16_t, DS_GGUF_I16, *out = (int16_t)rd16(kv->data))
SCALAR_GETTER(u32, uint32_t, DS_GGUF_U32, *out = rd32(kv->data))
SCALAR_GETTER(i32, int32_t, DS_GGUF_I32, *out = (int32_t)rd32(kv->data))
SCALAR_GETTER(u64, uint64_t, DS_GGUF_U64, *out = rd64(kv->data))
SCALAR_GETTER(i64, int64_t, DS_GGUF_I64, *out = (int64_t)rd64(kv->data))
SCALAR_GETTER(bool, bool, DS_GGUF_BOOL, *out = kv->data[0] != 0)
SCALAR_GETTER(f32, float, DS_GGUF_F32, uint32_t b = rd32(kv->data); memcpy(out, &b, 4))
SCALAR_GETTER(f64, double, DS_GGUF_F64, uint64_t b = rd64(kv->data); memcpy(out, &b, 8))
SCALAR_GETTER(str, ds_gguf_str, DS_GGUF_STRING, out->ptr = (const char *)kv->data; out->len = kv->count)

bool ds_gguf_get_arr(const ds_gguf *g, const char *key, int elem_type, ds_gguf_arr *out, char *err, size_t errlen) {
    const ds_gguf_kv *kv = typed(g, key, DS_GGUF_ARRAY, err, errlen);
    if (!kv) return false;
    if (elem_type >= 0 && kv->arr_type != (uint32_t)elem_type)
        return failf(err, errlen, g->name, "key '%s' is an array of %s, expected an array of %s", key,
                     ds_gguf_type_name(kv->arr_type), ds_gguf_type_name((uint32_t)elem_type));
    out->type = kv->arr_type;
    out->count = kv->count;
    out->data = kv->data;
    out->str_off = kv->str_off;
    return true;
}

/* An integer-typed value (scalar or element) at p, widened. */
static bool int_value(uint32_t type, const uint8_t *p, int64_t *v, bool *neg_or_huge) {
    *neg_or_huge = false;
    switch (type) {
    case DS_GGUF_U8: case DS_GGUF_BOOL: *v = p[0]; return true;
    case DS_GGUF_I8: *v = (int8_t)p[0]; return true;
    case DS_GGUF_U16: *v = rd16(p); return true;
    case DS_GGUF_I16: *v = (int16_t)rd16(p); return true;
    case DS_GGUF_U32: *v = rd32(p); return true;
    case DS_GGUF_I32: *v = (int32_t)rd32(p); return true;
    case DS_GGUF_I64: *v = (int64_t)rd64(p); return true;
    case DS_GGUF_U64: {
        uint64_t u = rd64(p);
        *neg_or_huge = u > (uint64_t)INT64_MAX;
        *v = (int64_t)u;
        return true;
    }
    }
    return false;
}

bool ds_gguf_get_int(const ds_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen) {
    const ds_gguf_kv *kv = ds_gguf_find_key(g, key);
    if (!kv) return failf(err, errlen, g->name, "key '%s' not found", key);
    int64_t v;
    bool huge;
    if (kv->type == DS_GGUF_BOOL || !int_value(kv->type, kv->data, &v, &huge))
        return failf(err, errlen, g->name, "key '%s' is %s, expected an integer", key, ds_gguf_type_name(kv->type));
    if (huge || v < lo || v > hi)
        return failf(err, errlen, g->name, "key '%s' is %s%" PRId64 ", outside [%" PRId64 ", %" PRId64 "]", key,
                     huge ? "above " : "", huge ? INT64_MAX : v, lo, hi);
    *out = v;
    return true;
}

ds_gguf_str ds_gguf_arr_str(const ds_gguf_arr *a, uint64_t i) {
    ds_gguf_str s = {"", 0};
    if (a->type != DS_GGUF_STRING || i >= a->count || !a->str_off) return s;
    const uint8_t *p = a->data + a->str_off[i];
    s.len = rd64(p);
    s.ptr = (const char *)p + 8;
    return s;
}

int64_t ds_gguf_arr_int(const ds_gguf_arr *a, uint64_t i) {
    int64_t v = 0;
    bool huge;
    if (i < a->count && a->type < DS_GGUF_NTYPES && value_type_size[a->type] &&
        !int_value(a->type, a->data + i * value_type_size[a->type], &v, &huge))
        v = 0; /* a float array: no conversion (a NaN has no integer value) */
    return v;
}

double ds_gguf_arr_float(const ds_gguf_arr *a, uint64_t i) {
    if (i >= a->count) return 0;
    if (a->type == DS_GGUF_F32) {
        uint32_t b = rd32(a->data + 4 * i);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    if (a->type == DS_GGUF_F64) {
        uint64_t b = rd64(a->data + 8 * i);
        double d;
        memcpy(&d, &b, 8);
        return d;
    }
    if (a->type < DS_GGUF_NTYPES && value_type_size[a->type]) return (double)ds_gguf_arr_int(a, i);
    return 0;
}

bool ds_gguf_str_eq(ds_gguf_str a, const char *s) { return strlen(s) == a.len && memcmp(a.ptr, s, (size_t)a.len) == 0; }

int ds_gguf_dequantize(const ds_gguf_tensor *t, int64_t row0, int64_t nrows, float *out, char *err, size_t errlen) {
    if (!ds_ggml_can_dequantize(t->type)) {
        failf(err, errlen, t->source, "tensor '%s' has type %s, which cannot be dequantised (F32, F16, Q8_0, Q4_0, Q4_1 can)",
              t->name, ds_ggml_type_name(t->type));
        return -1;
    }
    if (row0 < 0 || nrows < 0 || row0 > t->nrows || nrows > t->nrows - row0) {
        failf(err, errlen, t->source, "tensor '%s': rows [%" PRId64 ", %" PRId64 ") asked, it has %" PRId64, t->name, row0,
              row0 + nrows, t->nrows);
        return -1;
    }
    return ds_ggml_dequantize_row(t->type, t->data + (size_t)row0 * t->row_bytes, out, nrows * t->ne[0]);
}

/* ==== llama config =========================================================================== */

static bool get_float_any(const ds_gguf *g, const char *key, float *out, char *err, size_t errlen) {
    const ds_gguf_kv *kv = ds_gguf_find_key(g, key);
    if (kv && kv->type == DS_GGUF_F64) {
        double d;
        ds_gguf_get_f64(g, key, &d, NULL, 0);
        *out = (float)d;
        return true;
    }
    return ds_gguf_get_f32(g, key, out, err, errlen);
}

/* The tensor exists, has the shape ne0 x ne1 (ne1 = 1 for a vector) and can be dequantised. */
static bool want_tensor(const ds_gguf *g, const char *name, int64_t ne0, int64_t ne1, char *err, size_t errlen) {
    const ds_gguf_tensor *t = ds_gguf_find_tensor(g, name);
    if (!t) return failf(err, errlen, g->name, "tensor '%s' is missing", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return failf(err, errlen, g->name,
                     "tensor '%s' has ne = [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                     ", %" PRId64 "]",
                     name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1);
    if (!ds_ggml_can_dequantize(t->type))
        return failf(err, errlen, g->name, "tensor '%s' has type %s, which cannot be dequantised (F32, F16, Q8_0, Q4_0, Q4_1 can)",
                     name, ds_ggml_type_name(t->type));
    return true;
}

int ds_llama_config_read(const ds_gguf *g, ds_llama_config *cfg, char *err, size_t errlen) {
    memset(cfg, 0, sizeof *cfg);
    ds_gguf_str arch;
    if (!ds_gguf_get_str(g, "general.architecture", &arch, err, errlen)) return -1;
    if (!ds_gguf_str_eq(arch, "llama")) {
        failf(err, errlen, g->name, "general.architecture is '%.*s', not 'llama': only llama models are supported",
              (int)(arch.len > 60 ? 60 : arch.len), arch.ptr);
        return -1;
    }
    const int64_t big = 1 << 24;
    int64_t v[6];
    const char *keys[6] = {"llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
                           "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length"};
    for (int i = 0; i < 6; i++) {
        if (i == 4 && !ds_gguf_find_key(g, keys[4])) {
            v[4] = v[3]; /* no grouped-query attention */
            continue;
        }
        if (!ds_gguf_get_int(g, keys[i], 1, big, &v[i], err, errlen)) return -1;
    }
    cfg->n_layer = (int)v[0], cfg->n_embd = (int)v[1], cfg->n_ff = (int)v[2];
    cfg->n_head = (int)v[3], cfg->n_head_kv = (int)v[4], cfg->n_ctx = (int)v[5];
    if (cfg->n_embd % cfg->n_head) {
        failf(err, errlen, g->name, "%d heads do not divide the embedding length %d", cfg->n_head, cfg->n_embd);
        return -1;
    }
    if (cfg->n_head % cfg->n_head_kv) {
        failf(err, errlen, g->name, "%d KV heads do not divide the %d heads", cfg->n_head_kv, cfg->n_head);
        return -1;
    }
    cfg->head_dim = cfg->n_embd / cfg->n_head;
    int64_t rot;
    if (ds_gguf_find_key(g, "llama.rope.dimension_count")) {
        if (!ds_gguf_get_int(g, "llama.rope.dimension_count", 1, big, &rot, err, errlen)) return -1;
        if (rot != cfg->head_dim) {
            failf(err, errlen, g->name, "llama.rope.dimension_count %" PRId64 " differs from the head size %d (partial rotary is not supported)",
                  rot, cfg->head_dim);
            return -1;
        }
    }
    cfg->rope_freq_base = 10000.0f;
    if (ds_gguf_find_key(g, "llama.rope.freq_base") &&
        !get_float_any(g, "llama.rope.freq_base", &cfg->rope_freq_base, err, errlen))
        return -1;
    if (!get_float_any(g, "llama.attention.layer_norm_rms_epsilon", &cfg->rms_eps, err, errlen)) return -1;
    if (!(cfg->rope_freq_base > 0) || !(cfg->rms_eps > 0) || !isfinite(cfg->rope_freq_base) || !isfinite(cfg->rms_eps)) {
        failf(err, errlen, g->name, "rope base %g and RMS epsilon %g must be positive and finite", cfg->rope_freq_base,
              cfg->rms_eps);
        return -1;
    }

    const ds_gguf_tensor *emb = ds_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) {
        failf(err, errlen, g->name, "tensor 'token_embd.weight' is missing");
        return -1;
    }
    int64_t n_vocab = emb->ne[1];
    ds_gguf_arr toks = {0};
    if (ds_gguf_find_key(g, "tokenizer.ggml.tokens")) {
        if (!ds_gguf_get_arr(g, "tokenizer.ggml.tokens", DS_GGUF_STRING, &toks, err, errlen)) return -1;
        if ((int64_t)toks.count != n_vocab) {
            failf(err, errlen, g->name, "the tokenizer has %" PRIu64 " tokens but token_embd.weight has %" PRId64 " rows",
                  toks.count, n_vocab);
            return -1;
        }
    }
    if (n_vocab > INT32_MAX) {
        failf(err, errlen, g->name, "vocabulary of %" PRId64 " tokens is too large", n_vocab);
        return -1;
    }
    cfg->n_vocab = (int)n_vocab;

    int64_t E = cfg->n_embd, KV = (int64_t)cfg->n_head_kv * cfg->head_dim, F = cfg->n_ff;
    if (!want_tensor(g, "token_embd.weight", E, n_vocab, err, errlen) ||
        !want_tensor(g, "output_norm.weight", E, 1, err, errlen))
        return -1;
    cfg->tied_output = ds_gguf_find_tensor(g, "output.weight") == NULL;
    if (!cfg->tied_output && !want_tensor(g, "output.weight", E, n_vocab, err, errlen)) return -1;
    static const char *const names[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                          "ffn_norm",  "ffn_gate", "ffn_up", "ffn_down"};
    const int64_t shape[9][2] = {{E, 1}, {E, E}, {E, KV}, {E, KV}, {E, E}, {E, 1}, {E, F}, {E, F}, {F, E}};
    for (int l = 0; l < cfg->n_layer; l++)
        for (int k = 0; k < 9; k++) {
            char name[DS_GGUF_MAX_NAME + 1];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, names[k]);
            if (!want_tensor(g, name, shape[k][0], shape[k][1], err, errlen)) return -1;
        }
    return 0;
}
