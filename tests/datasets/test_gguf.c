/* test_gguf.c - the GGUF reader, writer, dequantiser, llama config and BPE tokenizer.
 *
 *   test_gguf TMPDIR               run the checks ("ok - ..." / "not ok - ..."; exit 1 on a failure)
 *   test_gguf --write-tiny PATH [SEED] [--with-output]   write the project's tiny llama GGUF
 *   test_gguf --write-seeds DIR    small GGUF files for the fuzzer's seed corpus
 *
 * Files are made two independent ways: by the writer, and byte by byte by hand_file() below,
 * which also makes each corrupt variant the reader must refuse. When the real SmolLM2 file
 * is present ($GGUF, else datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf) its numbers, a few
 * dequantised values and token ids from gguf-py / HuggingFace tokenizers are checked too. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ds_bpe.h"
#include "ds_gguf.h"

#define SMOLLM2_DEFAULT "datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf"

static int g_failed;
static const char *g_tmp;

/* One TAP line; `detail` (may be NULL) is shown in parentheses. */
static bool check(bool ok, const char *detail, const char *fmt, ...) {
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (!ok) g_failed++;
    printf("%s - %s%s%s%s\n", ok ? "ok" : "not ok", name, detail && detail[0] ? " (" : "", detail ? detail : "",
           detail && detail[0] ? ")" : "");
    fflush(stdout);
    return ok;
}

/* ==== a byte builder, independent of the writer ============================================ */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} buf;

static void b_put(buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n) + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}
static void b_u8(buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(buf *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b_u8(b, (uint8_t)(v >> 8 * i));
}
static void b_u64(buf *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b_u8(b, (uint8_t)(v >> 8 * i));
}
static void b_str(buf *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_pad(buf *b, size_t align) {
    while (b->len % align) b_u8(b, 0);
}

/* The ways hand_file() can break its otherwise valid file. */
typedef enum {
    HF_VALID, HF_MAGIC, HF_VERSION_99, HF_VERSION_1, HF_VERSION_2, HF_BIG_ENDIAN, HF_NT_HUGE, HF_NKV_HUGE,
    HF_KEY_LEN_HUGE, HF_STR_LEN_HUGE, HF_ARR_COUNT_HUGE, HF_STR_ARR_COUNT_HUGE, HF_VALUE_TYPE, HF_ARR_TYPE,
    HF_NESTED_2, HF_NESTED_3, HF_DUP_KEY, HF_BOOL_2, HF_EMPTY_KEY, HF_ALIGN_48, HF_ALIGN_U64, HF_ALIGN_64,
    HF_NDIMS_5, HF_NDIMS_0, HF_NE_ZERO, HF_NE_OVERFLOW, HF_TYPE_UNKNOWN, HF_TYPE_Q6K, HF_BLOCK_MISMATCH,
    HF_OFFSET_MISALIGNED, HF_OFFSET_PAST_END, HF_OFFSET_HUGE, HF_DATA_SHORT, HF_DUP_TENSOR, HF_NAME_LONG,
    HF_NAME_NUL, HF_COUNT
} hf_case;

/* A GGUF v3 file: 3 or 4 metadata entries, tensor "a" (F32 [8], floats 0..7) and tensor "b"
 * (Q4_0 [32, 2]: d = 0.5, every nibble 9, so every value 0.5), each at an aligned offset. */
static void hand_file(buf *b, hf_case c) {
    uint32_t align = c == HF_ALIGN_64 ? 64 : 32;
    bool align_key = c == HF_ALIGN_48 || c == HF_ALIGN_U64 || c == HF_ALIGN_64;
    bool nested = c == HF_NESTED_2 || c == HF_NESTED_3;
    b->len = 0;
    b_put(b, c == HF_MAGIC ? "GGUG" : "GGUF", 4);
    b_u32(b, c == HF_VERSION_99 ? 99 : c == HF_VERSION_1 ? 1 : c == HF_VERSION_2 ? 2 : c == HF_BIG_ENDIAN ? 0x03000000 : 3);
    b_u64(b, c == HF_NT_HUGE ? (uint64_t)1 << 60 : c == HF_STR_ARR_COUNT_HUGE ? 0 : 2);
    b_u64(b, c == HF_NKV_HUGE ? UINT64_MAX : c == HF_STR_ARR_COUNT_HUGE ? 1 : (uint64_t)(3 + align_key + nested));
    if (c == HF_STR_ARR_COUNT_HUGE) { /* one entry: a string array claiming 2^59 elements */
        b_str(b, "test.strings");
        b_u32(b, 9), b_u32(b, 8), b_u64(b, (uint64_t)1 << 59);
        b_str(b, "x");
        return;
    }

    if (c == HF_KEY_LEN_HUGE) b_u64(b, (uint64_t)1 << 40), b_put(b, "general.architecture", 20);
    else b_str(b, c == HF_EMPTY_KEY ? "" : "general.architecture");
    b_u32(b, 8); /* string */
    if (c == HF_STR_LEN_HUGE) b_u64(b, (uint64_t)1 << 62), b_put(b, "test", 4);
    else b_str(b, "test");

    b_str(b, "test.numbers");
    b_u32(b, c == HF_VALUE_TYPE ? 13 : 9); /* array */
    b_u32(b, c == HF_ARR_TYPE ? 99 : 5);   /* of i32 */
    b_u64(b, c == HF_ARR_COUNT_HUGE ? (uint64_t)1 << 61 : 3);
    b_u32(b, 1), b_u32(b, (uint32_t)-2), b_u32(b, 3);

    b_str(b, c == HF_DUP_KEY ? "test.numbers" : "test.flag");
    b_u32(b, 7); /* bool */
    b_u8(b, c == HF_BOOL_2 ? 2 : 1);

    if (align_key) {
        b_str(b, "general.alignment");
        if (c == HF_ALIGN_U64) b_u32(b, 10), b_u64(b, 32);
        else b_u32(b, 4), b_u32(b, c == HF_ALIGN_48 ? 48 : align);
    }
    if (nested) { /* [[1, 2, 3], [4, 5, 6]] as u8, or one level deeper */
        b_str(b, "test.nested");
        b_u32(b, 9), b_u32(b, 9), b_u64(b, 2);
        for (int i = 0; i < 2; i++) {
            if (c == HF_NESTED_3) {
                b_u32(b, 9), b_u64(b, 1);
                b_u32(b, 0), b_u64(b, 3), b_u8(b, 1), b_u8(b, 2), b_u8(b, 3);
            } else {
                b_u32(b, 0), b_u64(b, 3);
                for (int k = 1; k <= 3; k++) b_u8(b, (uint8_t)(3 * i + k));
            }
        }
    }

    /* tensor infos */
    b_str(b, c == HF_NAME_LONG ? "a_name_that_is_much_longer_than_the_sixty_four_bytes_the_format_allows" : "a");
    if (c == HF_NAME_NUL) b->p[b->len - 1] = 0; /* "a" becomes "\0" */
    b_u32(b, c == HF_NDIMS_5 ? 5 : c == HF_NDIMS_0 ? 0 : 1);
    if (c == HF_NDIMS_5)
        for (int d = 0; d < 5; d++) b_u64(b, d ? 1 : 8);
    else if (c != HF_NDIMS_0)
        b_u64(b, c == HF_NE_ZERO ? 0 : 8);
    b_u32(b, 0); /* F32 */
    b_u64(b, 0);

    b_str(b, c == HF_DUP_TENSOR ? "a" : "b");
    b_u32(b, 2);
    b_u64(b, c == HF_NE_OVERFLOW ? (uint64_t)1 << 40 : c == HF_BLOCK_MISMATCH ? 16 : c == HF_TYPE_Q6K ? 256 : 32);
    b_u64(b, c == HF_NE_OVERFLOW ? (uint64_t)1 << 40 : 2);
    b_u32(b, c == HF_TYPE_UNKNOWN ? 77 : c == HF_TYPE_Q6K ? 14 : 2);
    b_u64(b, c == HF_OFFSET_MISALIGNED ? 40 : c == HF_OFFSET_PAST_END ? 4096 : c == HF_OFFSET_HUGE ? UINT64_MAX - 31 : align);

    b_pad(b, align);
    for (int i = 0; i < 8; i++) {
        float f = (float)i;
        b_put(b, &f, 4);
    }
    b_pad(b, align);
    size_t tb = c == HF_TYPE_Q6K ? 2 * 210 : 2 * 18;
    for (size_t k = 0; k < tb; k++) b_u8(b, (uint8_t)(k % 18 == 0 ? 0x00 : k % 18 == 1 ? 0x38 : 0x99));
    if (c == HF_DATA_SHORT) b->len--;
}

/* ==== writer helpers ======================================================================= */

static uint8_t *writer_bytes(ds_gguf_writer *w, size_t *len) {
    uint8_t *p;
    char err[256];
    if (ds_gguf_writer_to_memory(w, &p, len, err, sizeof err) != 0) {
        printf("# writer: %s\n", err);
        return NULL;
    }
    return p;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*len ? *len : 1);
    if (fread(p, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return p;
}

static int64_t tensor_elems(int n_dims, const int64_t *ne) {
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= ne[d];
    return n;
}

/* Rewrite an open file through the writer, leaving out the keys and tensors named in `drop`
 * (NULL-terminated); `extra` then adds replacements. Returns the new bytes. */
static uint8_t *rewrite(const ds_gguf *g, const char *const *drop, void (*extra)(ds_gguf_writer *), size_t *len) {
    ds_gguf_writer *w = ds_gguf_writer_new(ds_gguf_alignment(g));
    for (int64_t i = 0; i < ds_gguf_n_kv(g); i++) {
        const ds_gguf_kv *kv = ds_gguf_kv_at(g, i);
        bool skip = strcmp(kv->key, "general.alignment") == 0;
        for (const char *const *d = drop; *d; d++) skip |= strcmp(*d, kv->key) == 0;
        if (skip) continue;
        char s[4096];
        switch (kv->type) {
        case DS_GGUF_STRING:
            snprintf(s, sizeof s, "%.*s", (int)kv->count, (const char *)kv->data);
            ds_gguf_add_str(w, kv->key, s);
            break;
        case DS_GGUF_ARRAY:
            if (kv->arr_type == DS_GGUF_STRING) {
                ds_gguf_arr a = {kv->arr_type, kv->count, kv->data, kv->str_off};
                char **v = calloc(kv->count + 1, sizeof *v);
                for (uint64_t k = 0; k < kv->count; k++) {
                    ds_gguf_str e = ds_gguf_arr_str(&a, k);
                    v[k] = calloc(e.len + 1, 1);
                    memcpy(v[k], e.ptr, e.len);
                }
                ds_gguf_add_arr_str(w, kv->key, (const char *const *)v, kv->count);
                for (uint64_t k = 0; k < kv->count; k++) free(v[k]);
                free(v);
            } else {
                ds_gguf_add_arr(w, kv->key, kv->arr_type, kv->data, kv->count);
            }
            break;
        case DS_GGUF_U32: ds_gguf_add_u32(w, kv->key, (uint32_t)(kv->data[0] | kv->data[1] << 8 | kv->data[2] << 16 | (uint32_t)kv->data[3] << 24)); break;
        case DS_GGUF_F32: {
            float f;
            memcpy(&f, kv->data, 4);
            ds_gguf_add_f32(w, kv->key, f);
            break;
        }
        case DS_GGUF_BOOL: ds_gguf_add_bool(w, kv->key, kv->data[0]); break;
        case DS_GGUF_U64: {
            uint64_t u;
            memcpy(&u, kv->data, 8);
            ds_gguf_add_u64(w, kv->key, u);
            break;
        }
        default: printf("# rewrite: key %s of type %s not copied\n", kv->key, ds_gguf_type_name(kv->type));
        }
    }
    for (int64_t i = 0; i < ds_gguf_n_tensors(g); i++) {
        const ds_gguf_tensor *t = ds_gguf_tensor_at(g, i);
        bool skip = false;
        for (const char *const *d = drop; *d; d++) skip |= strcmp(*d, t->name) == 0;
        if (!skip) ds_gguf_add_tensor_raw(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (extra) extra(w);
    uint8_t *p = writer_bytes(w, len);
    ds_gguf_writer_free(w);
    return p;
}

/* ==== half precision ======================================================================= */

/* The half nearest to |f| (ties to the even one), found by bisection over the ordered
 * positive halves: an independent reference for the bit-level conversion. */
static uint16_t ref_half(float f) {
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00; /* 65504 + half its ulp and up: infinity */
    int lo = 0, hi = 0x7bff;              /* the largest h with value(h) <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if ((double)ds_fp16_to_fp32((uint16_t)mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    double below = ds_fp16_to_fp32((uint16_t)lo), above = lo == 0x7bff ? 65536.0 : ds_fp16_to_fp32((uint16_t)(lo + 1));
    int h = a - below < above - a ? lo : a - below > above - a ? lo + 1 : (lo % 2 ? lo + 1 : lo);
    return (uint16_t)(sign | h);
}

static void test_fp16(void) {
    /* half -> float against the format's definition, value by value */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int e = (h >> 10) & 31, m = h & 1023;
        double want = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
        if (h & 0x8000) want = -want;
        float got = ds_fp16_to_fp32((uint16_t)h);
        if (isnan(want) ? !isnan(got) : (double)got != want || !signbit(got) != !signbit(want)) bad++;
    }
    char d[64];
    snprintf(d, sizeof d, "%d of 65536 wrong", bad);
    check(bad == 0, d, "fp16 -> fp32: all 65536 halves, subnormals, signed zeros, infinities and NaNs");

    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = ds_fp32_to_fp16(ds_fp16_to_fp32((uint16_t)h));
        bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan ? !((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h) bad++;
    }
    snprintf(d, sizeof d, "%d of 65536 changed", bad);
    check(bad == 0, d, "fp16 -> fp32 -> fp16 gives every half back (NaNs stay NaN)");

    /* float -> half: every midpoint between neighbouring halves (the ties), the points just
     * beside them, and random floats of every magnitude, against the bisection reference */
    bad = 0;
    int n = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double lo = ds_fp16_to_fp32((uint16_t)h), hi = ds_fp16_to_fp32((uint16_t)(h + 1)), mid = (lo + hi) / 2;
        float cand[3] = {(float)mid, nextafterf((float)mid, 0), nextafterf((float)mid, INFINITY)};
        for (int k = 0; k < 3; k++)
            for (int s = 0; s < 2; s++, n++) {
                float f = s ? -cand[k] : cand[k];
                if (ds_fp32_to_fp16(f) != ref_half(f)) bad++;
            }
    }
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 400000; i++, n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t bits = (uint32_t)x;
        float f;
        memcpy(&f, &bits, 4);
        if (isnan(f)) continue;
        if (ds_fp32_to_fp16(f) != ref_half(f)) bad++;
    }
    float edge[] = {65504.0f, 65519.99f, 65520.0f, 1e10f, INFINITY, -INFINITY, 0.0f, -0.0f, 5.9604645e-8f, 2.9802322e-8f,
                    2.9802326e-8f, 6.1035156e-5f, 6.1028302e-5f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, n++)
        if (ds_fp32_to_fp16(edge[i]) != ref_half(edge[i])) bad++;
    snprintf(d, sizeof d, "%d of %d differ", bad, n);
    check(bad == 0 && (ds_fp32_to_fp16(NAN) & 0x7fff) > 0x7c00, d,
          "fp32 -> fp16 rounds to nearest even like a bisection over all halves (ties, overflow to inf, subnormals, NaN)");
}

/* ==== block formats by hand ================================================================ */

static void test_blocks(void) {
    uint8_t q8[34], q40[18], q41[20], f16[16];
    float want8[32], want40[32], want41[32];
    q8[0] = 0x00, q8[1] = 0x38; /* d = 0.5 */
    for (int j = 0; j < 32; j++) {
        int8_t q = (int8_t)(j * 8 - 128); /* -128 .. 120 */
        q8[2 + j] = (uint8_t)q;
        want8[j] = q * 0.5f;
    }
    q40[0] = 0x00, q40[1] = 0x34; /* d = 0.25 */
    for (int j = 0; j < 16; j++) {
        q40[2 + j] = (uint8_t)(j | (15 - j) << 4);
        want40[j] = (j - 8) * 0.25f;           /* low nibble: element j      */
        want40[j + 16] = (15 - j - 8) * 0.25f; /* high nibble: element j + 16 */
    }
    q41[0] = 0x00, q41[1] = 0x40; /* d = 2    */
    q41[2] = 0x00, q41[3] = 0xbe; /* m = -1.5 */
    for (int j = 0; j < 16; j++) {
        q41[4 + j] = (uint8_t)(j | (15 - j) << 4);
        want41[j] = j * 2.0f - 1.5f;
        want41[j + 16] = (15 - j) * 2.0f - 1.5f;
    }
    /* 1, -2, 65504, 2^-24, -0, inf, -inf, NaN */
    const uint16_t hv[8] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0xfc00, 0x7e00};
    for (int i = 0; i < 8; i++) f16[2 * i] = (uint8_t)hv[i], f16[2 * i + 1] = (uint8_t)(hv[i] >> 8);

    ds_gguf_writer *w = ds_gguf_writer_new(32);
    int64_t ne32[1] = {32}, ne8[1] = {8};
    ds_gguf_add_tensor_raw(w, "q8", DS_GGML_Q8_0, 1, ne32, q8);
    ds_gguf_add_tensor_raw(w, "q40", DS_GGML_Q4_0, 1, ne32, q40);
    ds_gguf_add_tensor_raw(w, "q41", DS_GGML_Q4_1, 1, ne32, q41);
    ds_gguf_add_tensor_raw(w, "f16", DS_GGML_F16, 1, ne8, f16);
    size_t len;
    uint8_t *file = writer_bytes(w, &len);
    ds_gguf_writer_free(w);
    char err[256] = "";
    ds_gguf *g = file ? ds_gguf_open_memory(file, len, "blocks.gguf", err, sizeof err) : NULL;
    if (!check(g != NULL, err, "a file of hand-written blocks opens")) {
        free(file);
        return;
    }
    float y[32];
    const struct {
        const char *name;
        const float *want;
        const char *what;
    } cases[3] = {{"q8", want8, "Q8_0 block (d = 0.5, q = -128 .. 120): y = q d"},
                  {"q40", want40, "Q4_0 block (d = 0.25): low nibble element j, high nibble j + 16, y = (q - 8) d"},
                  {"q41", want41, "Q4_1 block (d = 2, m = -1.5): y = q d + m"}};
    for (int c = 0; c < 3; c++) {
        const ds_gguf_tensor *t = ds_gguf_find_tensor(g, cases[c].name);
        int rc = t ? ds_gguf_dequantize(t, 0, 1, y, err, sizeof err) : -1;
        check(rc == 0 && memcmp(y, cases[c].want, sizeof y) == 0 && t->nbytes == ds_ggml_type_size(t->type) &&
                  memcmp(t->data, c == 0 ? q8 : c == 1 ? q40 : q41, t->nbytes) == 0,
              rc ? err : NULL, "%s, exactly", cases[c].what);
    }
    const ds_gguf_tensor *t = ds_gguf_find_tensor(g, "f16");
    int rc = ds_gguf_dequantize(t, 0, 1, y, err, sizeof err);
    check(rc == 0 && y[0] == 1 && y[1] == -2 && y[2] == 65504 && y[3] == ldexpf(1, -24) && y[4] == 0 && signbit(y[4]) &&
              isinf(y[5]) && y[5] > 0 && isinf(y[6]) && y[6] < 0 && isnan(y[7]),
          NULL, "F16 tensor: 1, -2, 65504, 2^-24, -0, inf, -inf, NaN");
    ds_gguf_close(g);
    free(file);
}

/* ==== quantisers and tensor round trips ===================================================== */

/* The error of the value nearest to x[j] among those the block can represent, found by trying
 * every code: the block's scale is fixed by the format's rule (Q8_0 d = max|x| / 127; Q4_0
 * d = (the value of largest magnitude) / -8; Q4_1 d = (max - min) / 15, m = min), rounded to
 * fp16 as the file stores it, and the codes are those the writer may use (Q8_0 -127 .. 127,
 * 4-bit 0 .. 15). A round-to-nearest quantiser meets this bound exactly; any other scale rule
 * or rounding misses it somewhere. */
static double nearest_error(uint32_t type, const float *x, int j) {
    float amax = 0, max = 0, mn = x[0], mx = x[0];
    for (int k = 0; k < DS_QK; k++) {
        if (fabsf(x[k]) > amax) amax = fabsf(x[k]), max = x[k];
        mn = fminf(mn, x[k]), mx = fmaxf(mx, x[k]);
    }
    float d = 0, m = 0;
    int lo = 0, hi = 15, zero = 0;
    if (type == DS_GGML_Q8_0) d = amax / 127.0f, lo = -127, hi = 127;
    else if (type == DS_GGML_Q4_0) d = max / -8.0f, zero = 8;
    else d = (mx - mn) / 15.0f, m = ds_fp16_to_fp32(ds_fp32_to_fp16(mn));
    d = ds_fp16_to_fp32(ds_fp32_to_fp16(d));
    double best = INFINITY;
    for (int q = lo; q <= hi; q++) {
        float y = (float)(q - zero) * d + m; /* the dequantiser's arithmetic */
        best = fmin(best, fabs((double)y - x[j]));
    }
    return best;
}

/* The allowed error of element i of a tensor of `type` quantised from x. */
static double quant_bound(uint32_t type, const float *x, int64_t i) {
    if (type == DS_GGML_F32) return 0;
    if (type == DS_GGML_F16) return fabs(x[i]) * 0x1p-11 + 0x1p-25; /* half an ulp, subnormals 2^-25 */
    return nearest_error(type, x + i / DS_QK * DS_QK, (int)(i % DS_QK)) * (1 + 1e-6) + 1e-30;
}

/* Half the block's step, the classic bound, for the report: Q8_0 d/2, Q4_x d/2. */
static double half_step(uint32_t type, const float *x) {
    float amax = 0, mn = x[0], mx = x[0];
    for (int k = 0; k < DS_QK; k++) amax = fmaxf(amax, fabsf(x[k])), mn = fminf(mn, x[k]), mx = fmaxf(mx, x[k]);
    return type == DS_GGML_Q8_0 ? amax / 127 / 2 : type == DS_GGML_Q4_0 ? amax / 8 / 2 : (mx - mn) / 15 / 2;
}

/* Values spanning several magnitudes and offsets, so blocks differ in scale and sign. */
static float test_value(int64_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    double u = (double)(h % 1000003) / 1000003.0 - 0.5;
    double scale = pow(10.0, (double)((i / 32) % 7) - 3); /* 1e-3 .. 1e3 per block */
    double offset = (i / 32) % 3 == 2 ? 3 * scale : 0;    /* some blocks all positive */
    return (float)(u * scale + offset);
}

static void test_tensor_roundtrip(uint32_t align) {
    const uint32_t types[5] = {DS_GGML_F32, DS_GGML_F16, DS_GGML_Q8_0, DS_GGML_Q4_0, DS_GGML_Q4_1};
    const int64_t shapes[5][4] = {{64, 6, 1, 1}, {96, 5, 1, 1}, {64, 7, 1, 1}, {32, 3, 2, 2}, {128, 2, 3, 1}};
    const int dims[5] = {2, 2, 2, 4, 3};
    ds_gguf_writer *w = ds_gguf_writer_new(align);
    float *src[5];
    for (int k = 0; k < 5; k++) {
        int64_t n = tensor_elems(dims[k], shapes[k]);
        src[k] = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) src[k][i] = test_value(i + 1000 * k);
        char name[32];
        snprintf(name, sizeof name, "t.%s", ds_ggml_type_name(types[k]));
        ds_gguf_add_tensor(w, name, types[k], dims[k], shapes[k], src[k]);
    }
    size_t len;
    uint8_t *file = writer_bytes(w, &len);
    ds_gguf_writer_free(w);
    char err[256] = "";
    ds_gguf *g = file ? ds_gguf_open_memory(file, len, "roundtrip.gguf", err, sizeof err) : NULL;
    if (!check(g != NULL, err, "alignment %u: a file with F32, F16, Q8_0, Q4_0, Q4_1 tensors (2-D, 3-D, 4-D) opens", align))
        goto out;
    bool aligned = ds_gguf_data_offset(g) % align == 0 && ds_gguf_alignment(g) == align;
    for (int k = 0; k < 5; k++) {
        const ds_gguf_tensor *t = ds_gguf_tensor_at(g, k);
        aligned &= t->offset % align == 0 && (size_t)(t->data - file) % align == 0;
    }
    check(aligned, NULL, "alignment %u: data section and every tensor start on a multiple of it", align);
    for (int k = 0; k < 5; k++) {
        const ds_gguf_tensor *t = ds_gguf_tensor_at(g, k);
        int64_t n = tensor_elems(dims[k], shapes[k]);
        float *y = malloc((size_t)n * sizeof(float));
        bool shape = t->type == types[k] && t->n_dims == dims[k] && t->nelements == n && t->nrows == n / shapes[k][0];
        for (int d = 0; d < 4; d++) shape &= t->ne[d] == shapes[k][d];
        int rc = ds_gguf_dequantize(t, 0, t->nrows, y, err, sizeof err);
        double worst = 0; /* error / (half a step) for the block types */
        int64_t over = 0;
        for (int64_t i = 0; i < n && rc == 0; i++) {
            double err_i = fabs((double)y[i] - src[k][i]);
            if (err_i > quant_bound(types[k], src[k], i)) over++;
            if (types[k] != DS_GGML_F32 && types[k] != DS_GGML_F16)
                worst = fmax(worst, err_i / half_step(types[k], src[k] + i / DS_QK * DS_QK));
        }
        /* rows from the middle equal the same rows of the whole */
        float *part = malloc((size_t)(2 * t->ne[0]) * sizeof(float));
        int rc2 = ds_gguf_dequantize(t, 1, 2, part, err, sizeof err);
        bool rows = rc2 == 0 && memcmp(part, y + t->ne[0], (size_t)(2 * t->ne[0]) * sizeof(float)) == 0;
        char d[400];
        snprintf(d, sizeof d, "%" PRId64 " of %" PRId64 " over the bound; largest error / (d/2) %.3f%s%s", over, n, worst,
                 rc ? "; " : "", rc ? err : "");
        check(rc == 0 && shape && over == 0 && rows, d,
              "alignment %u: %s tensor round trip: shape kept, every value %s, rows 1..2 alone match", align,
              ds_ggml_type_name(types[k]),
              types[k] == DS_GGML_F32   ? "exact"
              : types[k] == DS_GGML_F16 ? "within fp16 rounding"
                                        : "the block's nearest representable value");
        free(part);
        free(y);
    }
    ds_gguf_close(g);
out:
    for (int k = 0; k < 5; k++) free(src[k]);
    free(file);
}

static void test_quantiser_edges(void) {
    float zeros[32] = {0}, y[32];
    uint8_t b[34];
    bool ok = true;
    for (uint32_t t = DS_GGML_Q4_0; t <= DS_GGML_Q8_0; t++) {
        if (!ds_ggml_can_dequantize(t) || t == DS_GGML_F32 || t == DS_GGML_F16) continue;
        ok &= ds_ggml_quantize_row(t, zeros, b, 32) == 0 && ds_ggml_dequantize_row(t, b, y, 32) == 0;
        for (int j = 0; j < 32; j++) ok &= y[j] == 0;
    }
    check(ok, NULL, "an all-zero block quantises and comes back as zeros (Q8_0, Q4_0, Q4_1)");
    /* the largest magnitude is reproduced exactly up to the fp16 rounding of d */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 20) * 0.37f; /* largest magnitude: -7.4 */
    ds_ggml_quantize_row(DS_GGML_Q4_0, x, b, 32);
    ds_ggml_dequantize_row(DS_GGML_Q4_0, b, y, 32);
    check((b[2] & 15) == 0 && fabsf(y[0] - x[0]) <= fabsf(x[0]) * 0x1p-10f, NULL,
          "Q4_0: the value of largest magnitude maps to q = 0 (i.e. -8 d) and back");
    float big[32];
    for (int j = 0; j < 32; j++) big[j] = j == 5 ? 1e6f : 1;
    ds_gguf_writer *w = ds_gguf_writer_new(32);
    int64_t ne[1] = {32};
    int rc = ds_gguf_add_tensor(w, "big", DS_GGML_Q4_1, 1, ne, big);
    const char *why = ds_gguf_writer_error(w);
    check(rc != 0 && why && strstr(why, "fp16 range"), why, "the writer refuses values a quantised block cannot hold (1e6 in Q4_1)");
    ds_gguf_writer_free(w);
    w = ds_gguf_writer_new(32);
    int64_t ne33[1] = {33};
    rc = ds_gguf_add_tensor(w, "odd", DS_GGML_Q8_0, 1, ne33, big);
    why = ds_gguf_writer_error(w);
    check(rc != 0 && why && strstr(why, "not a multiple"), why, "the writer refuses ne[0] = 33 for a block type");
    ds_gguf_writer_free(w);
    check(ds_gguf_writer_new(48) == NULL, NULL, "the writer refuses alignment 48 (not a power of two)");
}

/* ==== metadata ============================================================================= */

static const char *const meta_strs[4] = {"alpha", "", "\xce\xb2\xce\xb7\xcf\x84\xce\xb1", "with space"};
static const int32_t meta_i32[4] = {1, -2, INT32_MAX, INT32_MIN};
static const float meta_f32[3] = {0.5f, -1e-30f, 1e30f};
static const uint8_t meta_u8[3] = {0, 128, 255};
static const int16_t meta_i16[2] = {-300, 300};
static const uint64_t meta_u64[2] = {0, UINT64_MAX};
static const double meta_f64[2] = {1.0 / 3, -0.0};
static const uint8_t meta_bools[3] = {1, 0, 1};

/* One entry of every scalar type (extremes), strings, and arrays of most types. */
static void add_every_type(ds_gguf_writer *w) {
    ds_gguf_add_u8(w, "k.u8", 255);
    ds_gguf_add_i8(w, "k.i8", -128);
    ds_gguf_add_u16(w, "k.u16", 65535);
    ds_gguf_add_i16(w, "k.i16", -32768);
    ds_gguf_add_u32(w, "k.u32", 4000000000u);
    ds_gguf_add_i32(w, "k.i32", -2000000000);
    ds_gguf_add_u64(w, "k.u64", UINT64_MAX);
    ds_gguf_add_i64(w, "k.i64", INT64_MIN);
    ds_gguf_add_f32(w, "k.f32", 3.14159274f);
    ds_gguf_add_f64(w, "k.f64", 2.718281828459045);
    ds_gguf_add_bool(w, "k.true", true);
    ds_gguf_add_bool(w, "k.false", false);
    ds_gguf_add_str(w, "k.str", "h\xc3\xa9llo, \xe4\xb8\x96\xe7\x95\x8c");
    ds_gguf_add_str(w, "k.empty", "");
    ds_gguf_add_arr_str(w, "a.str", meta_strs, 4);
    ds_gguf_add_arr(w, "a.i32", DS_GGUF_I32, meta_i32, 4);
    ds_gguf_add_arr(w, "a.f32", DS_GGUF_F32, meta_f32, 3);
    ds_gguf_add_arr(w, "a.u8", DS_GGUF_U8, meta_u8, 3);
    ds_gguf_add_arr(w, "a.i16", DS_GGUF_I16, meta_i16, 2);
    ds_gguf_add_arr(w, "a.u64", DS_GGUF_U64, meta_u64, 2);
    ds_gguf_add_arr(w, "a.f64", DS_GGUF_F64, meta_f64, 2);
    ds_gguf_add_arr(w, "a.bool", DS_GGUF_BOOL, meta_bools, 3);
    ds_gguf_add_arr(w, "a.empty", DS_GGUF_I32, meta_i32, 0);
}

static void test_metadata(void) {
    ds_gguf_writer *w = ds_gguf_writer_new(64);
    add_every_type(w);
    check(ds_gguf_add_u32(w, "k.u32", 1) != 0 && strstr(ds_gguf_writer_error(w), "duplicate"), ds_gguf_writer_error(w),
          "the writer refuses a duplicate key");
    ds_gguf_writer_free(w);
    w = ds_gguf_writer_new(64);
    add_every_type(w);
    size_t len;
    char err[256] = "";
    uint8_t *file = writer_bytes(w, &len);
    ds_gguf_writer_free(w);
    ds_gguf *g = file ? ds_gguf_open_memory(file, len, "meta.gguf", err, sizeof err) : NULL;
    if (!check(g != NULL, err, "a file with metadata of every type opens")) {
        free(file);
        return;
    }
    uint8_t u8v;
    int8_t i8v;
    uint16_t u16v;
    int16_t i16v;
    uint32_t u32v;
    int32_t i32v;
    uint64_t u64v;
    int64_t i64v;
    float f32v;
    double f64v;
    bool bt, bf;
    ds_gguf_str s, e;
    bool ok = ds_gguf_get_u8(g, "k.u8", &u8v, err, sizeof err) && u8v == 255 && ds_gguf_get_i8(g, "k.i8", &i8v, err, sizeof err) &&
              i8v == -128 && ds_gguf_get_u16(g, "k.u16", &u16v, err, sizeof err) && u16v == 65535 &&
              ds_gguf_get_i16(g, "k.i16", &i16v, err, sizeof err) && i16v == -32768 &&
              ds_gguf_get_u32(g, "k.u32", &u32v, err, sizeof err) && u32v == 4000000000u &&
              ds_gguf_get_i32(g, "k.i32", &i32v, err, sizeof err) && i32v == -2000000000 &&
              ds_gguf_get_u64(g, "k.u64", &u64v, err, sizeof err) && u64v == UINT64_MAX &&
              ds_gguf_get_i64(g, "k.i64", &i64v, err, sizeof err) && i64v == INT64_MIN &&
              ds_gguf_get_f32(g, "k.f32", &f32v, err, sizeof err) && f32v == 3.14159274f &&
              ds_gguf_get_f64(g, "k.f64", &f64v, err, sizeof err) && f64v == 2.718281828459045 &&
              ds_gguf_get_bool(g, "k.true", &bt, err, sizeof err) && bt && ds_gguf_get_bool(g, "k.false", &bf, err, sizeof err) &&
              !bf && ds_gguf_get_str(g, "k.str", &s, err, sizeof err) && ds_gguf_str_eq(s, "h\xc3\xa9llo, \xe4\xb8\x96\xe7\x95\x8c") &&
              ds_gguf_get_str(g, "k.empty", &e, err, sizeof err) && e.len == 0;
    check(ok, err, "scalars round trip: u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string (extremes, UTF-8, empty)");

    ds_gguf_arr a;
    ok = ds_gguf_get_arr(g, "a.str", DS_GGUF_STRING, &a, err, sizeof err) && a.count == 4;
    for (int i = 0; ok && i < 4; i++) ok = ds_gguf_str_eq(ds_gguf_arr_str(&a, (uint64_t)i), meta_strs[i]);
    ok = ok && ds_gguf_get_arr(g, "a.i32", DS_GGUF_I32, &a, err, sizeof err) && a.count == 4;
    for (int i = 0; ok && i < 4; i++) ok = ds_gguf_arr_int(&a, (uint64_t)i) == meta_i32[i];
    ok = ok && ds_gguf_get_arr(g, "a.f32", DS_GGUF_F32, &a, err, sizeof err) && a.count == 3;
    for (int i = 0; ok && i < 3; i++) ok = (float)ds_gguf_arr_float(&a, (uint64_t)i) == meta_f32[i];
    ok = ok && ds_gguf_get_arr(g, "a.u8", DS_GGUF_U8, &a, err, sizeof err) && ds_gguf_arr_int(&a, 2) == 255;
    ok = ok && ds_gguf_get_arr(g, "a.i16", DS_GGUF_I16, &a, err, sizeof err) && ds_gguf_arr_int(&a, 0) == -300;
    ok = ok && ds_gguf_get_arr(g, "a.u64", DS_GGUF_U64, &a, err, sizeof err) && (uint64_t)ds_gguf_arr_int(&a, 1) == UINT64_MAX;
    ok = ok && ds_gguf_get_arr(g, "a.f64", DS_GGUF_F64, &a, err, sizeof err) && ds_gguf_arr_float(&a, 0) == 1.0 / 3 &&
         signbit(ds_gguf_arr_float(&a, 1));
    ok = ok && ds_gguf_get_arr(g, "a.bool", DS_GGUF_BOOL, &a, err, sizeof err) && ds_gguf_arr_int(&a, 0) == 1 &&
         ds_gguf_arr_int(&a, 1) == 0;
    ok = ok && ds_gguf_get_arr(g, "a.empty", -1, &a, err, sizeof err) && a.count == 0;
    check(ok, err, "arrays round trip: strings (one empty), i32, f32, u8, i16, u64, f64, bool, an empty array");

    ok = !ds_gguf_get_u32(g, "k.str", &u32v, err, sizeof err) && strcmp(err, "meta.gguf: key 'k.str' is string, expected u32") == 0;
    check(ok, err, "a getter of the wrong type fails with one line naming both types");
    ok = !ds_gguf_get_f32(g, "no.such.key", &f32v, err, sizeof err) && strcmp(err, "meta.gguf: key 'no.such.key' not found") == 0;
    check(ok, err, "a missing key fails with one line naming it");
    ok = !ds_gguf_get_arr(g, "a.i32", DS_GGUF_STRING, &a, err, sizeof err) && strstr(err, "array of i32, expected an array of string");
    check(ok, err, "an array of the wrong element type fails naming both");
    int64_t v;
    ok = ds_gguf_get_int(g, "k.u16", 0, 70000, &v, err, sizeof err) && v == 65535 &&
         !ds_gguf_get_int(g, "k.i32", 0, 10, &v, err, sizeof err) && strstr(err, "outside [0, 10]") &&
         !ds_gguf_get_int(g, "k.u64", 0, INT64_MAX, &v, err, sizeof err) &&
         !ds_gguf_get_int(g, "k.f32", 0, 10, &v, err, sizeof err) && strstr(err, "expected an integer");
    check(ok, err, "ds_gguf_get_int widens any integer type and refuses values out of range, u64 above INT64_MAX and floats");
    check(ds_gguf_alignment(g) == 64 && ds_gguf_find_key(g, "general.alignment") != NULL, NULL,
          "a writer alignment other than 32 is recorded as general.alignment and read back");
    ds_gguf_close(g);
    free(file);
}

/* ==== validation ============================================================================ */

static void test_hand_files(void) {
    static const struct {
        hf_case c;
        const char *what, *want; /* want NULL: the file is valid */
    } cases[] = {
        {HF_VALID, "the hand-made file", NULL},
        {HF_VERSION_2, "version 2", NULL},
        {HF_NESTED_2, "an array of arrays (depth 2)", NULL},
        {HF_ALIGN_64, "general.alignment 64", NULL},
        {HF_TYPE_Q6K, "a Q6_K tensor (valid, not dequantisable)", NULL},
        {HF_MAGIC, "a flipped magic", "model.gguf: not a GGUF file: magic 47 47 55 47, expected \"GGUF\""},
        {HF_VERSION_99, "version 99", "model.gguf: unsupported GGUF version 99 (2 and 3 are read)"},
        {HF_VERSION_1, "version 1", "unsupported GGUF version 1"},
        {HF_BIG_ENDIAN, "a big-endian file", "big-endian GGUF"},
        {HF_NT_HUGE, "a tensor count of 2^60", "tensor count 1152921504606846976 is absurd"},
        {HF_NKV_HUGE, "a metadata count of 2^64-1", "metadata count 18446744073709551615 is absurd"},
        {HF_KEY_LEN_HUGE, "a key length of 2^40", "metadata entry 0 of 3 has a key of 1099511627776 bytes but only"},
        {HF_STR_LEN_HUGE, "a string length of 2^62", "metadata 'general.architecture' has a string value of 4611686018427387904 bytes but only"},
        {HF_ARR_COUNT_HUGE, "an i32 array count of 2^61", "metadata 'test.numbers' holds an array of 2305843009213693952 i32 that needs at least"},
        {HF_STR_ARR_COUNT_HUGE, "a string array count of 2^59", "holds an array of 576460752303423488 string that needs at least"},
        {HF_VALUE_TYPE, "value type 13", "metadata 'test.numbers' has unknown value type 13"},
        {HF_ARR_TYPE, "array element type 99", "has an array of unknown value type 99"},
        {HF_NESTED_3, "arrays nested 3 deep", "metadata 'test.nested' has arrays nested more than 2 deep"},
        {HF_DUP_KEY, "a duplicate key", "metadata 'test.numbers' appears twice (metadata entries 1 and 2)"},
        {HF_BOOL_2, "a bool of 2", "metadata 'test.flag' has bool value 2 (0 or 1 expected)"},
        {HF_EMPTY_KEY, "an empty key", "metadata entry 0 of 3 has an empty key"},
        {HF_ALIGN_48, "general.alignment 48", "model.gguf: general.alignment 48 is not a power of two"},
        {HF_ALIGN_U64, "general.alignment stored as u64", "general.alignment is u64, expected u32"},
        {HF_NDIMS_5, "n_dims 5", "model.gguf: tensor 'a' has 5 dimensions (1 to 4 allowed)"},
        {HF_NDIMS_0, "n_dims 0", "tensor 'a' has 0 dimensions"},
        {HF_NE_ZERO, "a zero dimension", "tensor 'a' has dimension 0 equal to 0"},
        {HF_NE_OVERFLOW, "dimensions 2^40 x 2^40", "tensor 'b' has more elements than 64 bits count (dimension 1 is 1099511627776)"},
        {HF_TYPE_UNKNOWN, "tensor type 77", "tensor 'b' has unknown type 77"},
        {HF_BLOCK_MISMATCH, "a Q4_0 row of 16", "tensor 'b' has ne[0] = 16, not a multiple of the Q4_0 block size 32"},
        {HF_OFFSET_MISALIGNED, "offset 40", "tensor 'b' has offset 40, not a multiple of the alignment 32"},
        {HF_OFFSET_PAST_END, "offset 4096", NULL /* exact message built below */},
        {HF_OFFSET_HUGE, "offset 2^64-32", "tensor 'b' ends at byte 18446744073709551615 past the end of the file"},
        {HF_DATA_SHORT, "data one byte short", NULL /* exact message built below */},
        {HF_DUP_TENSOR, "a duplicate tensor name", "tensor 'a' appears twice (tensors 0 and 1)"},
        {HF_NAME_LONG, "a 70-byte tensor name", "tensor info 0 of 2 has a name of 70 bytes (the format allows at most 64)"},
        {HF_NAME_NUL, "a NUL in a tensor name", "tensor info 0 of 2 has a name containing a NUL byte"},
    };
    buf b = {0};
    char want[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hand_file(&b, cases[i].c);
        const char *expect = cases[i].want;
        if (cases[i].c == HF_OFFSET_PAST_END || cases[i].c == HF_DATA_SHORT) {
            /* the valid file ends with the data section: a (32 bytes at 0), b (36 bytes at 32) */
            buf v = {0};
            hand_file(&v, HF_VALID);
            size_t data_off = v.len - 32 - 36;
            uint64_t off = cases[i].c == HF_OFFSET_PAST_END ? 4096 : 32;
            snprintf(want, sizeof want, "model.gguf: tensor 'b' ends at byte %" PRIu64 " past the end of the file (%zu bytes)",
                     (uint64_t)data_off + off + 36, b.len);
            expect = want;
            free(v.p);
        }
        uint8_t *copy = malloc(b.len); /* exactly the file's bytes: ASan sees any overread */
        memcpy(copy, b.p, b.len);
        char err[512] = "";
        ds_gguf *g = ds_gguf_open_memory(copy, b.len, "model.gguf", err, sizeof err);
        if (!expect) {
            bool ok = g != NULL;
            if (g && cases[i].c == HF_VALID) {
                const ds_gguf_tensor *ta = ds_gguf_find_tensor(g, "a"), *tb = ds_gguf_find_tensor(g, "b");
                float y[64];
                ds_gguf_arr arr;
                ok = ta && tb && ds_gguf_dequantize(ta, 0, 1, y, err, sizeof err) == 0 && y[7] == 7 &&
                     ds_gguf_dequantize(tb, 0, 2, y, err, sizeof err) == 0 && y[0] == 0.5f && y[63] == 0.5f &&
                     ds_gguf_get_arr(g, "test.numbers", DS_GGUF_I32, &arr, err, sizeof err) && ds_gguf_arr_int(&arr, 1) == -2;
            }
            if (g && cases[i].c == HF_NESTED_2) {
                const ds_gguf_kv *kv = ds_gguf_find_key(g, "test.nested");
                ok = kv && kv->type == DS_GGUF_ARRAY && kv->arr_type == DS_GGUF_ARRAY && kv->count == 2;
            }
            if (g && cases[i].c == HF_TYPE_Q6K) {
                float y[512];
                const ds_gguf_tensor *tb = ds_gguf_find_tensor(g, "b");
                ok = tb && tb->nbytes == 420 && ds_gguf_dequantize(tb, 0, 1, y, err, sizeof err) != 0 &&
                     strstr(err, "has type Q6_K, which cannot be dequantised");
            }
            if (g && cases[i].c == HF_ALIGN_64) ok = ds_gguf_alignment(g) == 64 && ds_gguf_find_tensor(g, "b")->offset == 64;
            check(ok, err, "reader accepts %s", cases[i].what);
        } else {
            bool ok = g == NULL && strstr(err, expect) != NULL && strchr(err, '\n') == NULL &&
                      strncmp(err, "model.gguf: ", 12) == 0;
            check(ok, err, "reader refuses %s with one line: \"%s\"", cases[i].what, expect);
        }
        ds_gguf_close(g);
        free(copy);
    }

    /* every cut of the valid file fails cleanly until the last tensor's data is whole */
    hand_file(&b, HF_VALID);
    int bad = 0, cuts = 0;
    char first_bad[600] = "";
    for (size_t n = 0; n < b.len; n++, cuts++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        char err[512] = "";
        ds_gguf *g = ds_gguf_open_memory(copy, n, "model.gguf", err, sizeof err);
        if (g || !err[0] || strchr(err, '\n') || strncmp(err, "model.gguf: ", 12) != 0) {
            if (!first_bad[0]) snprintf(first_bad, sizeof first_bad, "cut at %zu: %s", n, g ? "opened" : err);
            bad++;
        }
        ds_gguf_close(g);
        free(copy);
    }
    check(bad == 0, first_bad, "every one of the %d truncations of the hand-made file is refused with one line", cuts);

    /* a real path: messages start with it; a missing file and a directory are named */
    char path[600], err[512] = "";
    snprintf(path, sizeof path, "%s/hand.gguf", g_tmp);
    hand_file(&b, HF_OFFSET_MISALIGNED);
    FILE *f = fopen(path, "wb");
    fwrite(b.p, 1, b.len, f);
    fclose(f);
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    char want2[700];
    snprintf(want2, sizeof want2, "%s: tensor 'b' has offset 40", path);
    check(!g && strncmp(err, want2, strlen(want2)) == 0, err, "a file on disk: the message starts with its path");
    snprintf(path, sizeof path, "%s/absent.gguf", g_tmp);
    g = ds_gguf_open(path, err, sizeof err);
    check(!g && strstr(err, "No such file"), err, "a missing file is one line");
    g = ds_gguf_open(g_tmp, err, sizeof err);
    check(!g && strstr(err, "is a directory"), err, "a directory is one line");
    snprintf(path, sizeof path, "%s/empty.gguf", g_tmp);
    fclose(fopen(path, "wb"));
    g = ds_gguf_open(path, err, sizeof err);
    check(!g && strstr(err, "empty"), err, "an empty file is one line");
    free(b.p);
}

/* A writer-made file, cut and corrupted where the header and the counts live. */
static void test_corrupt_writer_file(const uint8_t *file, size_t len, const ds_gguf *g) {
    const ds_gguf_tensor *last = ds_gguf_tensor_at(g, ds_gguf_n_tensors(g) - 1);
    size_t end = ds_gguf_data_offset(g) + last->offset + last->nbytes;
    int bad = 0, cuts = 0;
    char first_bad[600] = "";
    for (size_t n = 0; n <= len; n += (n < 4096 || n + 4096 > end) ? 1 : 61, cuts++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, file, n);
        char err[512] = "";
        ds_gguf *t = ds_gguf_open_memory(copy, n, "tiny.gguf", err, sizeof err);
        bool ok = n >= end ? t != NULL : !t && err[0] && !strchr(err, '\n') && strncmp(err, "tiny.gguf: ", 11) == 0;
        if (!ok && !first_bad[0]) snprintf(first_bad, sizeof first_bad, "cut at %zu: %s", n, t ? "opened" : err);
        bad += !ok;
        ds_gguf_close(t);
        free(copy);
    }
    char d[700];
    snprintf(d, sizeof d, "%d wrong; %s", bad, first_bad);
    check(bad == 0, bad ? d : NULL,
          "tiny model cut at %d points: refused with one line before its last tensor ends (byte %zu), opened after", cuts, end);

    uint8_t *copy = malloc(len);
    const struct {
        size_t at;
        uint64_t value;
        int bytes;
        const char *want;
    } pokes[] = {{0, 0x46554748, 4, "not a GGUF file: magic 48 47 55 46"},           {4, 99, 4, "unsupported GGUF version 99"},
                 {8, (uint64_t)1 << 62, 8, "tensor count"},         {16, (uint64_t)1 << 62, 8, "metadata count"},
                 {24, (uint64_t)1 << 50, 8, "metadata entry 0 of 23 has a key of 1125899906842624 bytes but only"},
                 {52, 99, 4, "metadata 'general.architecture' has unknown value type 99"}};
    for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++) {
        memcpy(copy, file, len);
        for (int k = 0; k < pokes[i].bytes; k++) copy[pokes[i].at + (size_t)k] = (uint8_t)(pokes[i].value >> 8 * k);
        char err[512] = "";
        ds_gguf *t = ds_gguf_open_memory(copy, len, "tiny.gguf", err, sizeof err);
        check(!t && strstr(err, pokes[i].want) && !strchr(err, '\n'), err,
              "tiny model with bytes %zu.. set to %" PRIu64 ": refused (\"%s\")", pokes[i].at, pokes[i].value, pokes[i].want);
        ds_gguf_close(t);
    }
    free(copy);
}

/* ==== the tiny llama: config, weights, tokenizer ============================================ */

static void set_arch_gpt2(ds_gguf_writer *w) { ds_gguf_add_str(w, "general.architecture", "gpt2"); }
static void set_heads_3(ds_gguf_writer *w) { ds_gguf_add_u32(w, "llama.attention.head_count", 3); }
static void set_kv_heads_3(ds_gguf_writer *w) { ds_gguf_add_u32(w, "llama.attention.head_count_kv", 3); }
static void set_rope_dims_8(ds_gguf_writer *w) { ds_gguf_add_u32(w, "llama.rope.dimension_count", 8); }
static void bad_attn_k_shape(ds_gguf_writer *w) {
    static float x[64 * 64];
    int64_t ne[2] = {64, 64};
    ds_gguf_add_tensor(w, "blk.0.attn_k.weight", DS_GGML_F32, 2, ne, x);
}
static void bf16_attn_q(ds_gguf_writer *w) {
    static uint16_t x[64 * 64];
    int64_t ne[2] = {64, 64};
    ds_gguf_add_tensor_raw(w, "blk.0.attn_q.weight", 30, 2, ne, x);
}
static void ten_tokens(ds_gguf_writer *w) {
    const char *t[10] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    ds_gguf_add_arr_str(w, "tokenizer.ggml.tokens", t, 10);
}
static void ten_types(ds_gguf_writer *w) {
    const int32_t t[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    ds_gguf_add_arr(w, "tokenizer.ggml.token_type", DS_GGUF_I32, t, 10);
}
static void model_llama(ds_gguf_writer *w) { ds_gguf_add_str(w, "tokenizer.ggml.model", "llama"); }
static void pre_qwen2(ds_gguf_writer *w) { ds_gguf_add_str(w, "tokenizer.ggml.pre", "qwen2"); }
static void merges_bad_half(ds_gguf_writer *w) {
    const char *m[2] = {"\xc4\xa0 t", "q zz"};
    ds_gguf_add_arr_str(w, "tokenizer.ggml.merges", m, 2);
}
static void merges_no_space(ds_gguf_writer *w) {
    const char *m[1] = {"abc"};
    ds_gguf_add_arr_str(w, "tokenizer.ggml.merges", m, 1);
}

typedef struct {
    const char *what;
    const char *drop[3];
    void (*extra)(ds_gguf_writer *);
    bool tokenizer; /* the error comes from ds_bpe_from_gguf rather than the config */
    const char *want;
} edit_case;

static void test_config_errors(const ds_gguf *tiny) {
    static const edit_case cases[] = {
        {"general.architecture 'gpt2'", {"general.architecture"}, set_arch_gpt2, false,
         "general.architecture is 'gpt2', not 'llama': only llama models are supported"},
        {"a missing tensor", {"blk.1.ffn_up.weight"}, NULL, false, "tensor 'blk.1.ffn_up.weight' is missing"},
        {"a tensor of the wrong shape", {"blk.0.attn_k.weight"}, bad_attn_k_shape, false,
         "tensor 'blk.0.attn_k.weight' has ne = [64, 64, 1, 1], expected [64, 32]"},
        {"a BF16 weight", {"blk.0.attn_q.weight"}, bf16_attn_q, false, "has type BF16, which cannot be dequantised"},
        {"3 heads for an embedding of 64", {"llama.attention.head_count"}, set_heads_3, false,
         "3 heads do not divide the embedding length 64"},
        {"3 KV heads for 4 heads", {"llama.attention.head_count_kv"}, set_kv_heads_3, false, "3 KV heads do not divide the 4 heads"},
        {"a rotary dimension of 8", {"llama.rope.dimension_count"}, set_rope_dims_8, false, "partial rotary"},
        {"no RMS epsilon", {"llama.attention.layer_norm_rms_epsilon"}, NULL, false,
         "key 'llama.attention.layer_norm_rms_epsilon' not found"},
        {"10 tokens for 302 embedding rows", {"tokenizer.ggml.tokens"}, ten_tokens, false,
         "the tokenizer has 10 tokens but token_embd.weight has 302 rows"},
        {"tokenizer model 'llama'", {"tokenizer.ggml.model"}, model_llama, true,
         "tokenizer.ggml.model is 'llama': only 'gpt2' (byte-level BPE) is implemented"},
        {"pre-tokenizer 'qwen2'", {"tokenizer.ggml.pre"}, pre_qwen2, true, "tokenizer.ggml.pre 'qwen2' is not implemented"},
        {"a merge whose half is not a token", {"tokenizer.ggml.merges"}, merges_bad_half, true,
         "merge 1 ('q zz'): its right half is not a token"},
        {"a merge without a space", {"tokenizer.ggml.merges"}, merges_no_space, true,
         "merge 0 ('abc') is not two tokens separated by a space"},
        {"10 token types for 302 tokens", {"tokenizer.ggml.token_type"}, ten_types, true,
         "tokenizer.ggml.token_type has 10 entries for 302 tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        const char *drop[4] = {cases[i].drop[0], cases[i].drop[1], cases[i].drop[2], NULL};
        uint8_t *file = rewrite(tiny, drop, cases[i].extra, &len);
        char err[512] = "";
        ds_gguf *g = file ? ds_gguf_open_memory(file, len, "edit.gguf", err, sizeof err) : NULL;
        bool ok = false;
        if (g) {
            ds_llama_config c;
            if (cases[i].tokenizer) {
                ds_bpe *b = ds_bpe_from_gguf(g, err, sizeof err);
                ok = !b;
                ds_bpe_free(b);
            } else {
                ok = ds_llama_config_read(g, &c, err, sizeof err) != 0;
            }
            ok = ok && strstr(err, cases[i].want) && strncmp(err, "edit.gguf: ", 11) == 0 && !strchr(err, '\n');
        }
        check(ok, err, "%s refuses %s: \"%s\"", cases[i].tokenizer ? "tokenizer" : "llama config", cases[i].what, cases[i].want);
        ds_gguf_close(g);
        free(file);
    }
}

static void test_tiny_model(void) {
    char path[600], path2[600], err[512] = "";
    snprintf(path, sizeof path, "%s/tiny.gguf", g_tmp);
    snprintf(path2, sizeof path2, "%s/tiny-out.gguf", g_tmp);
    const uint64_t seed = 1234;
    int rc = ds_tiny_llama_write(path, seed, NULL, false, err, sizeof err);
    if (!check(rc == 0, err, "ds_tiny_llama_write writes the tiny llama")) return;
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    if (!check(g != NULL, err, "the tiny llama opens")) return;
    ds_llama_config c;
    rc = ds_llama_config_read(g, &c, err, sizeof err);
    check(rc == 0 && c.n_layer == DS_TINY_N_LAYER && c.n_embd == DS_TINY_N_EMBD && c.n_ff == DS_TINY_N_FF &&
              c.n_head == DS_TINY_N_HEAD && c.n_head_kv == DS_TINY_N_HEAD_KV && c.n_ctx == DS_TINY_N_CTX &&
              c.n_vocab == ds_tiny_llama_vocab() && c.head_dim == DS_TINY_N_EMBD / DS_TINY_N_HEAD &&
              c.rope_freq_base == DS_TINY_ROPE_BASE && c.rms_eps == DS_TINY_RMS_EPS && c.tied_output,
          rc ? err : NULL, "tiny llama config: %d layers, embd %d, ff %d, %d heads, %d KV heads, vocab %d, ctx %d, tied output",
          c.n_layer, c.n_embd, c.n_ff, c.n_head, c.n_head_kv, c.n_vocab, c.n_ctx);

    /* every weight within its type's bound of the RNG master it was quantised from */
    int over = 0, tensors = 0, types_seen = 0;
    char first[256] = "";
    for (int64_t i = 0; i < ds_gguf_n_tensors(g); i++) {
        const ds_gguf_tensor *t = ds_gguf_tensor_at(g, i);
        int layer = -1, kind = -1;
        char part[64] = "";
        if (strcmp(t->name, "token_embd.weight") == 0) kind = DS_TINY_TOKEN_EMBD;
        else if (strcmp(t->name, "output_norm.weight") == 0) kind = DS_TINY_OUTPUT_NORM;
        else if (sscanf(t->name, "blk.%d.%63[a-z_].weight", &layer, part) == 2) {
            static const char *const parts[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
            for (int k = 0; k < 9; k++)
                if (strcmp(part, parts[k]) == 0) kind = DS_TINY_ATTN_NORM + k;
        }
        if (kind < 0) continue;
        tensors++;
        types_seen |= 1 << t->type;
        float *y = malloc((size_t)t->nelements * sizeof(float)), *x = malloc((size_t)t->nelements * sizeof(float));
        ds_gguf_dequantize(t, 0, t->nrows, y, err, sizeof err);
        for (int64_t k = 0; k < t->nelements; k++) x[k] = ds_tiny_llama_weight(seed, layer, kind, t->ne[0], k);
        for (int64_t k = 0; k < t->nelements; k++) {
            if (fabs((double)y[k] - x[k]) > quant_bound(t->type, x, k)) {
                if (!over) snprintf(first, sizeof first, "%s[%" PRId64 "]: %g vs %g", t->name, k, y[k], x[k]);
                over++;
            }
        }
        free(x);
        free(y);
    }
    uint32_t want_types = 1 << DS_GGML_F32 | 1 << DS_GGML_F16 | 1 << DS_GGML_Q8_0 | 1 << DS_GGML_Q4_0 | 1 << DS_GGML_Q4_1;
    check(over == 0 && tensors == 2 + 9 * DS_TINY_N_LAYER && (uint32_t)types_seen == want_types, first,
          "tiny llama: all %d tensors (F32, F16, Q8_0, Q4_0, Q4_1) hold the nearest representable values of the RNG master weights", tensors);

    /* same seed, same bytes; another seed, other weights; with_output adds an F16 output */
    char path3[600];
    snprintf(path3, sizeof path3, "%s/tiny-again.gguf", g_tmp);
    ds_tiny_llama_write(path3, seed, NULL, false, err, sizeof err);
    size_t l1, l3;
    uint8_t *b1 = slurp(path, &l1), *b3 = slurp(path3, &l3);
    bool same = b1 && b3 && l1 == l3 && memcmp(b1, b3, l1) == 0;
    free(b3);
    check(same, NULL, "tiny llama: the same seed writes the same bytes");
    rc = ds_tiny_llama_write(path2, seed, NULL, true, err, sizeof err);
    ds_gguf *g2 = rc == 0 ? ds_gguf_open(path2, err, sizeof err) : NULL;
    ds_llama_config c2;
    const ds_gguf_tensor *out = g2 ? ds_gguf_find_tensor(g2, "output.weight") : NULL;
    check(g2 && ds_llama_config_read(g2, &c2, err, sizeof err) == 0 && !c2.tied_output && out && out->type == DS_GGML_F16,
          err, "tiny llama with_output: an F16 output.weight, config not tied");
    ds_gguf_close(g2);
    ds_llama_config shape = c;
    shape.n_layer = 2, shape.n_embd = 96, shape.n_head = 6, shape.n_head_kv = 3, shape.n_ff = 160;
    rc = ds_tiny_llama_write(path2, 7, &shape, false, err, sizeof err);
    g2 = rc == 0 ? ds_gguf_open(path2, err, sizeof err) : NULL;
    check(g2 && ds_llama_config_read(g2, &c2, err, sizeof err) == 0 && c2.n_layer == 2 && c2.n_embd == 96 && c2.n_head == 6 &&
              c2.n_head_kv == 3 && c2.n_ff == 160 && c2.head_dim == 16,
          err, "tiny llama of another shape (2 layers, embd 96, 6 heads, 3 KV heads, ff 160)");
    ds_gguf_close(g2);
    shape.n_embd = 100;
    check(ds_tiny_llama_write(path2, 7, &shape, false, err, sizeof err) != 0 && strstr(err, "bad tiny llama shape"), err,
          "tiny llama refuses an embedding of 100 (not a multiple of 32)");

    uint8_t *file = b1;
    size_t len = l1;
    test_corrupt_writer_file(file, len, g);
    free(file);
    test_config_errors(g);
    ds_gguf_close(g);
}

/* ==== tokenizer =============================================================================== */

static void pieces(ds_bpe_pre pre, const char *text, char *out, size_t cap) {
    size_t ends[64], n = ds_bpe_pretokenize(pre, text, strlen(text), ends, 64), start = 0, k = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        k += (size_t)snprintf(out + k, cap - k, "%s[%.*s]", i ? " " : "", (int)(ends[i] - start), text + start);
        start = ends[i];
    }
}

static void test_pretokenizer(void) {
    /* expected pieces as HuggingFace tokenizers' ByteLevel pre-tokenizer gives them (alone
     * for gpt2; after Digits(individual_digits) for smollm) */
    static const struct {
        const char *text, *gpt2, *smollm;
    } cases[] = {
        {"Hello world's 123  end\n", "[Hello] [ world] ['s] [ 123] [ ] [ end] [\n]",
         "[Hello] [ world] ['s] [ ] [1] [2] [3] [ ] [ end] [\n]"},
        {"a\tb", "[a] [\t] [b]", "[a] [\t] [b]"},
        {"x  \ty", "[x] [  ] [\t] [y]", "[x] [  ] [\t] [y]"},
        {"don't DON'T", "[don] ['t] [ DON] ['] [T]", "[don] ['t] [ DON] ['] [T]"},
        {"?!...  ", "[?!...] [  ]", "[?!...] [  ]"},
        {" ...x", "[ ...] [x]", "[ ...] [x]"},
        {"h\xc3\xa9llo w\xc3\xb6rld", "[h\xc3\xa9llo] [ w\xc3\xb6rld]", "[h\xc3\xa9llo] [ w\xc3\xb6rld]"},
        {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "[\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e]", "[\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e]"},
        {"x\xc2\xb2 3", "[x] [\xc2\xb2] [ 3]", "[x] [\xc2\xb2] [ ] [3]"},
        {"a  1", "[a] [ ] [ 1]", "[a] [  ] [1]"},
        {"'''s", "['''] [s]", "['''] [s]"},
        {"x'sup", "[x] ['s] [up]", "[x] ['s] [up]"},
        {"1.5e10", "[1] [.] [5] [e] [10]", "[1] [.] [5] [e] [1] [0]"},
        {"a\xc2\xa0" "b", "[a] [\xc2\xa0] [b]", "[a] [\xc2\xa0] [b]"},
        {" \n\n  x", "[ \n\n ] [ x]", "[ \n\n ] [ x]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[512], got2[512], d[1100];
        pieces(DS_BPE_PRE_GPT2, cases[i].text, got, sizeof got);
        pieces(DS_BPE_PRE_SMOLLM, cases[i].text, got2, sizeof got2);
        snprintf(d, sizeof d, "gpt2 %s / smollm %s", got, got2);
        for (char *p = d; *p; p++)
            if (*p == '\n') *p = '~'; /* keep the TAP line whole */
        char name[64];
        snprintf(name, sizeof name, "%.20s", cases[i].text);
        for (char *p = name; *p; p++)
            if (*p == '\n' || *p == '\t') *p = '~';
        bool ok = strcmp(got, cases[i].gpt2) == 0 && strcmp(got2, cases[i].smollm) == 0;
        check(ok, ok ? NULL : d, "pre-tokenizer splits \"%s\" as HuggingFace does (gpt2 and smollm)", name);
    }
}

static int64_t encode(const ds_bpe *b, const char *text, unsigned flags, int32_t *ids, int64_t cap) {
    char err[256];
    return ds_bpe_encode(b, text, strlen(text), flags, ids, cap, err, sizeof err);
}

static bool ids_equal(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

static void ids_text(const int32_t *ids, int64_t n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int64_t i = 0; i < n && k + 12 < cap; i++) k += (size_t)snprintf(out + k, cap - k, "%s%d", i ? "," : "", ids[i]);
}

static void test_tiny_tokenizer(void) {
    char path[600], err[512] = "";
    snprintf(path, sizeof path, "%s/tiny.gguf", g_tmp);
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    ds_bpe *b = g ? ds_bpe_from_gguf(g, err, sizeof err) : NULL;
    ds_gguf_close(g); /* the tokenizer keeps its own copy */
    if (!check(b != NULL, err, "tiny tokenizer loads (and outlives its file)")) return;
    bool all = true;
    for (int c = 0; c < 256; c++) all &= ds_bpe_has_byte(b, (uint8_t)c);
    check(ds_bpe_n_vocab(b) == ds_tiny_llama_vocab() && ds_bpe_bos(b) == 1 && ds_bpe_eos(b) == 2 && all &&
              ds_bpe_is_control(b, 1) && !ds_bpe_is_control(b, 40) && ds_bpe_pre_kind(b) == DS_BPE_PRE_SMOLLM &&
              ds_bpe_token_id(b, "\xc4\xa0the") == 263,
          NULL, "tiny tokenizer: %d tokens, bos 1, eos 2, every byte a token, control tokens, pre smollm", ds_bpe_n_vocab(b));

    /* by hand: token id = 3 + byte for single bytes, 259 + rank for merges. "Hello": l+l (22),
     * H+e (39), He+ll (40), Hell+o (41) -> 300; " the" -> 263; " cat": a+t (9), Ġ+c (13),
     * Ġc+at (32) -> 291; " in": i+n (2) first, and no merge joins Ġ with "in" -> 35, 261;
     * " hat" -> 292 */
    int32_t ids[4096];
    const int32_t want1[] = {300, 263, 291, 35, 261, 263, 292};
    int64_t n = encode(b, "Hello the cat in the hat", 0, ids, 4096);
    char d[512];
    ids_text(ids, n, d, sizeof d);
    check(ids_equal(ids, n, want1, 7), d, "tiny tokenizer: \"Hello the cat in the hat\" -> 300 263 291 35 261 263 292 (merges by hand)");
    const int32_t want2[] = {1, 1, 300, 2, 3 + '2', 3 + '0', 3 + '2', 3 + '4'};
    n = encode(b, "<|im_start|>Hello<|im_end|>2024", DS_BPE_ADD_BOS | DS_BPE_SPECIAL, ids, 4096);
    ids_text(ids, n, d, sizeof d);
    check(ids_equal(ids, n, want2, 8), d, "tiny tokenizer: BOS, special tokens matched literally, digits one by one");
    n = encode(b, "<|im_start|>", 0, ids, 4096);
    bool no_special = n == 12;
    for (int64_t i = 0; i < n; i++) no_special &= ids[i] >= 3;
    check(no_special, NULL, "tiny tokenizer: without DS_BPE_SPECIAL, \"<|im_start|>\" is 12 plain byte tokens");
    n = encode(b, "Hello the cat in the hat", 0, ids, 3);
    check(n == 7 && ids[0] == 300 && ids[2] == 291, NULL, "tiny tokenizer: a short buffer gets the first ids and the full count");

    /* round trips: text with every byte value, UTF-8, whitespace runs, special tokens */
    int bad = 0, tries = 0;
    uint64_t x = 12345;
    char text[600], back[700];
    for (int t = 0; t < 2000; t++, tries++) {
        size_t len = (size_t)(t % 300) + 1;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            static const char *const frags[] = {" the", "  ", "\n", "cat", "<|im_end|>", "'s", "7", "\xc3\xa9", "\xf0\x9f\x8e\x89"};
            if (x % 5 == 0) {
                const char *fr = frags[(x >> 8) % 9];
                size_t fl = strlen(fr);
                if (i + fl > len) break;
                memcpy(text + i, fr, fl);
                i += fl - 1;
            } else {
                text[i] = (char)(x >> 24); /* any byte, NUL included */
            }
        }
        n = ds_bpe_encode(b, text, len, t % 2 ? DS_BPE_SPECIAL : 0, ids, 4096, err, sizeof err);
        int64_t m = n >= 0 ? ds_bpe_decode(b, ids, n, back, sizeof back, err, sizeof err) : -1;
        if (m != (int64_t)len || memcmp(back, text, len) != 0) bad++;
    }
    snprintf(d, sizeof d, "%d of %d differ", bad, tries);
    check(bad == 0, d, "tiny tokenizer: decode(encode(x)) == x for %d random byte strings (every byte value, special tokens)", tries);
    n = encode(b, "<|im_end|>", DS_BPE_SPECIAL, ids, 4096);
    int64_t m = ds_bpe_decode(b, ids, n, back, sizeof back, err, sizeof err);
    check(n == 1 && m == 10 && strcmp(back, "<|im_end|>") == 0, NULL, "tiny tokenizer: a control token decodes to its text");
    int32_t bad_id[2] = {300, 302};
    m = ds_bpe_decode(b, bad_id, 2, back, sizeof back, err, sizeof err);
    check(m == -1 && strstr(err, "token id 302 at position 1 is outside [0, 302)"), err, "tiny tokenizer: an id out of range is refused");
    m = ds_bpe_decode(b, want1, 7, back, 6, err, sizeof err);
    check(m == 24 && strcmp(back, "Hello") == 0, back, "tiny tokenizer: decode into a short buffer cuts and returns the full length");
    ds_bpe_free(b);
}

/* ==== the real SmolLM2 file =================================================================== */

static void test_smollm2(void) {
    const char *path = getenv("GGUF");
    if (!path || !path[0]) path = SMOLLM2_DEFAULT;
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("# SmolLM2 file absent: real-model checks skipped (%s; scripts/fetch-model.sh fetches it)\n", path);
        return;
    }
    char err[512] = "";
    clock_t t0 = clock();
    ds_gguf *g = ds_gguf_open(path, err, sizeof err);
    double open_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (!check(g != NULL, err, "real model %s opens (%.3f s)", path, open_s)) return;
    ds_gguf_str base = {"", 0};
    ds_gguf_get_str(g, "general.basename", &base, NULL, 0);
    if (!ds_gguf_str_eq(base, "smollm2") || ds_gguf_n_tensors(g) != 272) {
        ds_llama_config c;
        check(ds_llama_config_read(g, &c, err, sizeof err) == 0, err, "%s: llama config reads", path);
        printf("# %s is not SmolLM2-135M: its specific checks skipped\n", path);
        ds_gguf_close(g);
        return;
    }
    ds_llama_config c;
    int rc = ds_llama_config_read(g, &c, err, sizeof err);
    check(rc == 0 && c.n_layer == 30 && c.n_embd == 576 && c.n_ff == 1536 && c.n_head == 9 && c.n_head_kv == 3 &&
              c.n_vocab == 49152 && c.head_dim == 64 && c.rope_freq_base == 100000.0f && c.rms_eps == 1e-5f &&
              c.n_ctx == 8192 && c.tied_output,
          err, "SmolLM2: 30 layers, embd 576, ff 1536, 9 heads, 3 KV heads, vocab 49152, rope 1e5, eps 1e-5, tied output");
    int q41 = 0, f32 = 0, other = 0;
    for (int64_t i = 0; i < ds_gguf_n_tensors(g); i++) {
        uint32_t t = ds_gguf_tensor_at(g, i)->type;
        q41 += t == DS_GGML_Q4_1, f32 += t == DS_GGML_F32, other += t != DS_GGML_Q4_1 && t != DS_GGML_F32;
    }
    const ds_gguf_tensor *emb = ds_gguf_find_tensor(g, "token_embd.weight");
    check(q41 == 210 && f32 == 61 && other == 1 && emb && emb->type == DS_GGML_Q8_0 && !ds_gguf_find_tensor(g, "output.weight"),
          NULL, "SmolLM2: %d Q4_1 tensors, %d F32, token_embd Q8_0, no output.weight", q41, f32);

    /* values gguf-py's gguf.quants.dequantize gives (bit for bit) */
    static const struct {
        const char *name;
        int64_t row;
        float v[4];
    } known[] = {
        {"token_embd.weight", 19556, {-0x1.a3ap-5f, 0x1.466p-5f, 0.0f, 0x1.5dbp-4f}},
        {"blk.0.attn_q.weight", 5, {0x1.38p-4f, -0x1.194p-2f, -0x1.4ep-5f, 0x1.ca2p-1f}},
        {"blk.29.ffn_down.weight", 575, {-0x1.d56p-3f, -0x1.408p-5f, -0x1.1b58p-2f, 0x1.f7cp-3f}},
        {"output_norm.weight", 0, {0x1.c2p+0f, 0x1.d2p+0f, 0x1.c8p+0f, 0x1.9ap+0f}},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        const ds_gguf_tensor *t = ds_gguf_find_tensor(g, known[k].name);
        float *row = t ? malloc((size_t)t->ne[0] * sizeof(float)) : NULL;
        rc = t ? ds_gguf_dequantize(t, known[k].row, 1, row, err, sizeof err) : -1;
        check(rc == 0 && memcmp(row, known[k].v, sizeof known[k].v) == 0, rc ? err : NULL,
              "SmolLM2: %s row %" PRId64 " starts with gguf-py's values, bit for bit", known[k].name, known[k].row);
        free(row);
    }
    t0 = clock();
    float *all = malloc((size_t)emb->nelements * sizeof(float));
    rc = ds_gguf_dequantize(emb, 0, emb->nrows, all, err, sizeof err);
    double deq_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    free(all);
    check(rc == 0, err, "SmolLM2: the whole token embedding (%" PRId64 " x %" PRId64 ") dequantises (%.3f s)", emb->nrows,
          emb->ne[0], deq_s);

    t0 = clock();
    ds_bpe *b = ds_bpe_from_gguf(g, err, sizeof err);
    double load_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (!check(b != NULL, err, "SmolLM2 tokenizer loads (%.3f s)", load_s)) {
        ds_gguf_close(g);
        return;
    }
    /* ids from HuggingFace tokenizers built on the same vocabulary and merges (docs/gguf.md) */
    static const int32_t k1[] = {19556, 905};
    static const int32_t k2[] = {1, 4093, 198, 1780, 314, 216, 33, 34, 35, 36, 37, 1232, 216, 38, 39, 40, 47, 2};
    static const int32_t k3[] = {504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30};
    static const int32_t k4[] = {57, 5248, 4979, 28, 1326, 982, 256, 5321, 2026, 216, 294, 2756, 31394, 267,
                                 29989, 400, 5549, 126, 17097, 241, 115, 40993, 179, 120, 248, 15107, 232, 227};
    static const struct {
        const char *text;
        const int32_t *ids;
        int64_t n;
    } refs[] = {
        {"Hello world", k1, 2},
        {"<|im_start|>user\nWhat is 12345 + 678?<|im_end|>", k2, 18},
        {"The quick brown fox jumps over the lazy dog.", k3, 10},
        {"I'm fine, don't   worry...  h\xc3\xa9llo w\xc3\xb6rld \xc3\xb1 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x8e\x89", k4, 28},
    };
    for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++) {
        int32_t ids[256];
        char back[512], d[600], name[48];
        int64_t n = encode(b, refs[k].text, DS_BPE_SPECIAL, ids, 256);
        int64_t m = ds_bpe_decode(b, ids, n, back, sizeof back, err, sizeof err);
        ids_text(ids, n, d, sizeof d);
        snprintf(name, sizeof name, "%.24s", refs[k].text);
        for (char *p = name; *p; p++)
            if (*p == '\n') *p = '~';
        check(ids_equal(ids, n, refs[k].ids, refs[k].n) && m == (int64_t)strlen(refs[k].text) && strcmp(back, refs[k].text) == 0,
              d, "SmolLM2 tokenizer: \"%s...\" -> HuggingFace's %" PRId64 " ids, and decodes back", name, refs[k].n);
    }
    /* a prompt of a few thousand bytes: round trip and speed */
    size_t len = 0, cap = 6000;
    char *text = malloc(cap + 64), *back = malloc(cap + 64);
    static const char *const words[] = {"The ", "row split ", "gives ", "each GPU ", "128 ", "rows, ", "and ",
                                        "layer-split ", "models ", "don't ", "stall.\n", "\xc3\xa9t\xc3\xa9 ", "\xe2\x80\x94 "};
    for (int i = 0; len + 20 < cap; i++) {
        size_t l = strlen(words[(i * 7) % 13]);
        memcpy(text + len, words[(i * 7) % 13], l);
        len += l;
    }
    int32_t *ids = malloc((cap + 2) * sizeof *ids);
    t0 = clock();
    int64_t n = ds_bpe_encode(b, text, len, 0, ids, (int64_t)cap + 2, err, sizeof err);
    double enc_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    int64_t m = ds_bpe_decode(b, ids, n, back, cap + 64, err, sizeof err);
    check(n > 0 && m == (int64_t)len && memcmp(back, text, len) == 0 && enc_s < 1.0, NULL,
          "SmolLM2 tokenizer: a %zu-byte prompt -> %" PRId64 " ids in %.4f s (< 1 s), decodes back", len, n, enc_s);
    free(text), free(back), free(ids);
    int missing = 0;
    for (int c2 = 0; c2 < 256; c2++) missing += !ds_bpe_has_byte(b, (uint8_t)c2);
    int32_t one[4];
    n = ds_bpe_encode(b, "a\x1d" "b", 3, 0, one, 4, err, sizeof err);
    check(missing == 21 && n == 2, NULL,
          "SmolLM2 tokenizer: its 21 bytes without a token (e.g. 0x1d) are dropped, as HuggingFace tokenizers drops them");
    ds_bpe_free(b);
    ds_gguf_close(g);
}

/* ==== tools ==================================================================================== */

static int write_seeds(const char *dir) {
    char path[600], err[512];
    buf b = {0};
    static const hf_case seeds[] = {HF_VALID, HF_NESTED_2, HF_ALIGN_64, HF_TYPE_Q6K, HF_VERSION_2};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        hand_file(&b, seeds[i]);
        snprintf(path, sizeof path, "%s/hand%zu.gguf", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b.p, 1, b.len, f) != b.len) return fprintf(stderr, "%s: cannot write\n", path), 1;
        fclose(f);
    }
    free(b.p);
    ds_llama_config small = {.n_layer = 1, .n_embd = 32, .n_ff = 32, .n_head = 2, .n_head_kv = 1, .n_ctx = 8,
                             .rope_freq_base = 10000.0f, .rms_eps = 1e-5f};
    snprintf(path, sizeof path, "%s/tiny1.gguf", dir);
    if (ds_tiny_llama_write(path, 1, &small, true, err, sizeof err) != 0) return fprintf(stderr, "%s\n", err), 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--write-tiny") == 0) {
        char err[512];
        uint64_t seed = argc >= 4 && argv[3][0] != '-' ? strtoull(argv[3], NULL, 10) : 1;
        bool with_output = strcmp(argv[argc - 1], "--with-output") == 0;
        if (ds_tiny_llama_write(argv[2], seed, NULL, with_output, err, sizeof err) != 0) {
            fprintf(stderr, "error: %s\n", err);
            return 1;
        }
        printf("wrote %s (tiny llama, seed %" PRIu64 "%s)\n", argv[2], seed, with_output ? ", with output.weight" : "");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: test_gguf TMPDIR | --write-tiny PATH [SEED] [--with-output] | --write-seeds DIR\n");
        return 2;
    }
    g_tmp = argv[1];
    test_fp16();
    test_blocks();
    test_quantiser_edges();
    test_tensor_roundtrip(32);
    test_tensor_roundtrip(1);
    test_tensor_roundtrip(4096);
    test_metadata();
    test_hand_files();
    test_tiny_model();
    test_pretokenizer();
    test_tiny_tokenizer();
    test_smollm2();
    return g_failed ? 1 : 0;
}
