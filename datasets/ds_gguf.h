/* ds_gguf.h - GGUF model files (llama.cpp's format): read, validate, dequantise, write.
 *
 * A GGUF file is little-endian: a header (magic "GGUF", version, tensor count, metadata
 * count), typed key/value metadata, one info record per tensor (name, dimensions, type,
 * offset), padding to `general.alignment`, then the tensor data. docs/gguf.md draws it.
 *
 * The reader maps the file (or takes a buffer) and validates all of it before returning:
 * every count against the bytes that could hold it, every string and array inside the
 * file, every tensor inside the data section. A problem is one line "<name>: <problem>" in
 * `err`, never an abort, so it can be fuzzed (tests/datasets/fuzz_gguf.c) and the caller
 * chooses how to fail. Nothing here depends on the rest of ParaLab except the writer's tiny
 * model, which lives in ds_gguf_write.c because it draws its weights from pl_rng.
 *
 * ne[0] is the contiguous dimension: a PyTorch [out, in] weight is stored with
 * ne = {in, out}, so one "row" (ne[0] elements) is one output feature's weights.
 */
#ifndef DS_GGUF_H
#define DS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DS_GGUF_MAX_DIMS 4
#define DS_GGUF_DEFAULT_ALIGNMENT 32
#define DS_GGUF_MAX_NAME 64       /* tensor names, as the format specifies         */
#define DS_GGUF_MAX_KEY 65535     /* metadata keys                                 */
#define DS_GGUF_MAX_ARRAY_DEPTH 2 /* an array of arrays is read; one level deeper is refused */

/* ---- metadata value types (the numbering is the file's) ------------------------------- */
enum {
    DS_GGUF_U8 = 0,
    DS_GGUF_I8 = 1,
    DS_GGUF_U16 = 2,
    DS_GGUF_I16 = 3,
    DS_GGUF_U32 = 4,
    DS_GGUF_I32 = 5,
    DS_GGUF_F32 = 6,
    DS_GGUF_BOOL = 7,
    DS_GGUF_STRING = 8,
    DS_GGUF_ARRAY = 9,
    DS_GGUF_U64 = 10,
    DS_GGUF_I64 = 11,
    DS_GGUF_F64 = 12,
    DS_GGUF_NTYPES
};
/* "u32", "string", ...; "?" for a number outside the table. */
const char *ds_gguf_type_name(uint32_t type);

/* ---- tensor types (ggml's numbering) ----------------------------------------------------
 * The reader knows the block size and byte size of every fixed-size ggml type, so it can
 * validate and list any GGUF file; dequantisation covers the five types below. */
enum {
    DS_GGML_F32 = 0,
    DS_GGML_F16 = 1,
    DS_GGML_Q4_0 = 2,
    DS_GGML_Q4_1 = 3,
    DS_GGML_Q8_0 = 8,
};
#define DS_QK 32 /* elements per block of Q4_0, Q4_1 and Q8_0 */

/* Name ("Q4_1"), or NULL for a type the reader does not know. */
const char *ds_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; 0 for an unknown type. */
int64_t ds_ggml_block_size(uint32_t type);
size_t ds_ggml_type_size(uint32_t type);
/* Bytes of n elements (n a multiple of the block size). */
size_t ds_ggml_row_bytes(uint32_t type, int64_t n);
/* True for F32, F16, Q8_0, Q4_0, Q4_1. */
bool ds_ggml_can_dequantize(uint32_t type);

/* IEEE binary16 <-> binary32, by hand: subnormals, infinities and NaNs kept; float to half
 * rounds to nearest, ties to even, and overflows to infinity. */
float ds_fp16_to_fp32(uint16_t h);
uint16_t ds_fp32_to_fp16(float f);

/* n elements (a multiple of the block size) of `type` at src -> float32. src needs no
 * alignment. Returns 0, or -1 when the type cannot be dequantised. */
int ds_ggml_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* ---- the reader ------------------------------------------------------------------------- */
typedef struct ds_gguf ds_gguf;

/* A string inside the file: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} ds_gguf_str;

/* One metadata entry, read-only. Use the getters below rather than its fields when you can. */
typedef struct {
    const char *key;        /* NUL-terminated copy                                          */
    uint32_t type;          /* DS_GGUF_*                                                    */
    uint32_t arr_type;      /* arrays: the element type                                     */
    uint64_t count;         /* strings: bytes; arrays: elements; scalars: 1                 */
    const uint8_t *data;    /* scalars: the value; strings: the bytes; arrays: element 0    */
    const uint64_t *str_off;/* arrays of strings: element i starts at data + str_off[i]     */
} ds_gguf_kv;

/* An array value: use the element accessors, which check nothing but the index. */
typedef struct {
    uint32_t type;   /* element type */
    uint64_t count;
    const uint8_t *data;
    const uint64_t *str_off;
} ds_gguf_arr;

typedef struct {
    const char *name;          /* NUL-terminated                                            */
    uint32_t type;             /* DS_GGML_* (or another ggml type the reader knows)         */
    int n_dims;                /* 1 .. 4                                                    */
    int64_t ne[DS_GGUF_MAX_DIMS]; /* ne[0] contiguous; dimensions past n_dims are 1         */
    int64_t nelements;
    int64_t nrows;             /* nelements / ne[0]                                         */
    size_t row_bytes;          /* bytes of one row of ne[0] elements                        */
    size_t nbytes;
    uint64_t offset;           /* from the start of the data section                        */
    const uint8_t *data;       /* inside the mapped file                                    */
    const char *source;        /* the file's name, for messages                             */
} ds_gguf_tensor;

/* Open and validate a file (mapped read-only). NULL with err set on any problem. */
ds_gguf *ds_gguf_open(const char *path, char *err, size_t errlen);
/* The same from a buffer that must outlive the handle; `name` prefixes the messages. */
ds_gguf *ds_gguf_open_memory(const void *buf, size_t len, const char *name, char *err, size_t errlen);
void ds_gguf_close(ds_gguf *g);

const char *ds_gguf_name(const ds_gguf *g);
uint32_t ds_gguf_version(const ds_gguf *g);
uint32_t ds_gguf_alignment(const ds_gguf *g);
size_t ds_gguf_data_offset(const ds_gguf *g); /* where the data section starts in the file */
size_t ds_gguf_file_size(const ds_gguf *g);

int64_t ds_gguf_n_kv(const ds_gguf *g);
const ds_gguf_kv *ds_gguf_kv_at(const ds_gguf *g, int64_t i);
const ds_gguf_kv *ds_gguf_find_key(const ds_gguf *g, const char *key);

/* Typed getters: true and *out set, or false with "<name>: key 'k' not found" or
 * "<name>: key 'k' is a string, expected u32" in err (err may be NULL). No conversions. */
bool ds_gguf_get_u8(const ds_gguf *g, const char *key, uint8_t *out, char *err, size_t errlen);
bool ds_gguf_get_i8(const ds_gguf *g, const char *key, int8_t *out, char *err, size_t errlen);
bool ds_gguf_get_u16(const ds_gguf *g, const char *key, uint16_t *out, char *err, size_t errlen);
bool ds_gguf_get_i16(const ds_gguf *g, const char *key, int16_t *out, char *err, size_t errlen);
bool ds_gguf_get_u32(const ds_gguf *g, const char *key, uint32_t *out, char *err, size_t errlen);
bool ds_gguf_get_i32(const ds_gguf *g, const char *key, int32_t *out, char *err, size_t errlen);
bool ds_gguf_get_u64(const ds_gguf *g, const char *key, uint64_t *out, char *err, size_t errlen);
bool ds_gguf_get_i64(const ds_gguf *g, const char *key, int64_t *out, char *err, size_t errlen);
bool ds_gguf_get_f32(const ds_gguf *g, const char *key, float *out, char *err, size_t errlen);
bool ds_gguf_get_f64(const ds_gguf *g, const char *key, double *out, char *err, size_t errlen);
bool ds_gguf_get_bool(const ds_gguf *g, const char *key, bool *out, char *err, size_t errlen);
bool ds_gguf_get_str(const ds_gguf *g, const char *key, ds_gguf_str *out, char *err, size_t errlen);
/* elem_type: the element type required, or -1 for any. */
bool ds_gguf_get_arr(const ds_gguf *g, const char *key, int elem_type, ds_gguf_arr *out, char *err,
                     size_t errlen);
/* Any integer (or bool) scalar that fits in [lo, hi], converted: for counts that converters
 * may store as u32 or u64. */
bool ds_gguf_get_int(const ds_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err,
                     size_t errlen);

/* Element i of an array (i < count): a string; an integer or bool (0 from a float array);
 * a float or integer. Out-of-range indices and elements of an array of arrays read as empty / 0. */
ds_gguf_str ds_gguf_arr_str(const ds_gguf_arr *a, uint64_t i);
int64_t ds_gguf_arr_int(const ds_gguf_arr *a, uint64_t i); /* u64 above INT64_MAX wraps */
double ds_gguf_arr_float(const ds_gguf_arr *a, uint64_t i);

/* Does a file string equal the C string s? */
bool ds_gguf_str_eq(ds_gguf_str a, const char *s);

int64_t ds_gguf_n_tensors(const ds_gguf *g);
const ds_gguf_tensor *ds_gguf_tensor_at(const ds_gguf *g, int64_t i);
const ds_gguf_tensor *ds_gguf_find_tensor(const ds_gguf *g, const char *name);

/* Rows [row0, row0 + nrows) of t (a row is ne[0] elements; rows run over ne[1], then ne[2],
 * ne[3]) into out[nrows * ne[0]] as float32. Row split is served by this: a rank
 * dequantises only the rows it owns. Whole tensor: row0 = 0, nrows = t->nrows.
 * Returns 0, or -1 with err set (rows out of range, type not dequantisable). */
int ds_gguf_dequantize(const ds_gguf_tensor *t, int64_t row0, int64_t nrows, float *out, char *err,
                       size_t errlen);

/* ---- llama hyper-parameters ------------------------------------------------------------- */
typedef struct {
    int n_layer;          /* llama.block_count                                              */
    int n_embd;           /* llama.embedding_length                                         */
    int n_ff;             /* llama.feed_forward_length                                      */
    int n_head;           /* llama.attention.head_count                                     */
    int n_head_kv;        /* llama.attention.head_count_kv (n_head when absent)             */
    int n_vocab;          /* tokenizer.ggml.tokens length, else token_embd.weight's ne[1]   */
    int n_ctx;            /* llama.context_length: the trained context                      */
    int head_dim;         /* n_embd / n_head                                                */
    float rope_freq_base; /* llama.rope.freq_base (10000 when absent)                       */
    float rms_eps;        /* llama.attention.layer_norm_rms_epsilon                         */
    bool tied_output;     /* no output.weight: the output layer reuses token_embd.weight    */
} ds_llama_config;

/* Read the llama.* keys of a file whose general.architecture is "llama", check that they
 * agree with each other (heads divide the embedding, KV heads divide the heads) and that
 * every tensor a llama forward needs is present with its shape. 0, or -1 with err set. */
int ds_llama_config_read(const ds_gguf *g, ds_llama_config *cfg, char *err, size_t errlen);

/* ---- the writer (ds_gguf_write.c) ------------------------------------------------------- */
typedef struct ds_gguf_writer ds_gguf_writer;

/* alignment: a power of two; anything but 32 is recorded as general.alignment. NULL when the
 * alignment is not a power of two or memory runs out. */
ds_gguf_writer *ds_gguf_writer_new(uint32_t alignment);
void ds_gguf_writer_free(ds_gguf_writer *w);
/* The first problem met by any add below (later adds are ignored), or NULL. */
const char *ds_gguf_writer_error(const ds_gguf_writer *w);

/* Scalars and strings; each returns 0, or -1 (bad key, duplicate key). */
int ds_gguf_add_u8(ds_gguf_writer *w, const char *key, uint8_t v);
int ds_gguf_add_i8(ds_gguf_writer *w, const char *key, int8_t v);
int ds_gguf_add_u16(ds_gguf_writer *w, const char *key, uint16_t v);
int ds_gguf_add_i16(ds_gguf_writer *w, const char *key, int16_t v);
int ds_gguf_add_u32(ds_gguf_writer *w, const char *key, uint32_t v);
int ds_gguf_add_i32(ds_gguf_writer *w, const char *key, int32_t v);
int ds_gguf_add_u64(ds_gguf_writer *w, const char *key, uint64_t v);
int ds_gguf_add_i64(ds_gguf_writer *w, const char *key, int64_t v);
int ds_gguf_add_f32(ds_gguf_writer *w, const char *key, float v);
int ds_gguf_add_f64(ds_gguf_writer *w, const char *key, double v);
int ds_gguf_add_bool(ds_gguf_writer *w, const char *key, bool v);
int ds_gguf_add_str(ds_gguf_writer *w, const char *key, const char *v);
/* An array of a numeric or bool type: `values` holds count elements of that C type
 * (uint8_t for u8 and bool, int32_t for i32, float for f32, ...). */
int ds_gguf_add_arr(ds_gguf_writer *w, const char *key, uint32_t elem_type, const void *values, uint64_t count);
int ds_gguf_add_arr_str(ds_gguf_writer *w, const char *key, const char *const *values, uint64_t count);

/* A tensor from float32 data (nelements values, ne[0] contiguous), quantised to `type` by
 * round-to-nearest per block: Q8_0 d = max|x| / 127; Q4_0 d = (the value of largest
 * magnitude) / -8; Q4_1 d = (max - min) / 15, m = min. ne[0] must be a multiple of the
 * block size. Returns 0, or -1 (bad name or shape, duplicate name, unsupported type). */
int ds_gguf_add_tensor(ds_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                       const float *data);
/* A tensor whose bytes are already in the type's layout (any type the reader knows). */
int ds_gguf_add_tensor_raw(ds_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *bytes);
/* Quantise n floats (a multiple of the block size) into dst (ds_ggml_row_bytes bytes). */
int ds_ggml_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

/* The whole file in a malloc'ed buffer (free it), or to a path. 0, or -1 with err set. */
int ds_gguf_writer_to_memory(const ds_gguf_writer *w, uint8_t **buf, size_t *len, char *err, size_t errlen);
int ds_gguf_writer_save(const ds_gguf_writer *w, const char *path, char *err, size_t errlen);

/* ---- the project's tiny llama ------------------------------------------------------------
 * A llama-shaped model small enough for tests and CPU runs: DS_TINY_* below unless `shape`
 * says otherwise (its n_layer, n_embd, n_ff, n_head, n_head_kv, n_ctx, rope_freq_base,
 * rms_eps are used; n_embd and n_ff must be multiples of 32). Tensors are named as
 * llama.cpp names them and mix types: F32 norms, Q8_0 token embedding and FFN gate/up,
 * Q4_0 / Q4_1 / F16 / F32 attention weights depending on the layer (layer l uses
 * ds_tiny_llama_attn_type(l)), Q4_1 ffn_down; output.weight (F16) only when with_output,
 * else the output is tied to token_embd. Weights come from pl_rng_value(seed, id, index)
 * with id = ds_tiny_llama_tensor_id(layer, kind), normal with standard deviation
 * 1/sqrt(fan-in) (norms: 1 + uniform(-0.1, 0.1)), so the float master weights can be
 * regenerated. The tokenizer is a byte-level BPE ("gpt2", pre "smollm") with three control
 * tokens, the 256 byte tokens and a few dozen English merges (DS_TINY_VOCAB tokens). */
#define DS_TINY_N_LAYER 4
#define DS_TINY_N_EMBD 64
#define DS_TINY_N_FF 128
#define DS_TINY_N_HEAD 4
#define DS_TINY_N_HEAD_KV 2
#define DS_TINY_N_CTX 64
#define DS_TINY_ROPE_BASE 10000.0f
#define DS_TINY_RMS_EPS 1e-5f

enum { /* tensor kinds, for ds_tiny_llama_tensor_id */
    DS_TINY_TOKEN_EMBD, DS_TINY_OUTPUT_NORM, DS_TINY_OUTPUT,
    DS_TINY_ATTN_NORM, DS_TINY_ATTN_Q, DS_TINY_ATTN_K, DS_TINY_ATTN_V, DS_TINY_ATTN_OUTPUT,
    DS_TINY_FFN_NORM, DS_TINY_FFN_GATE, DS_TINY_FFN_UP, DS_TINY_FFN_DOWN, DS_TINY_NKINDS
};
uint64_t ds_tiny_llama_tensor_id(int layer, int kind); /* layer -1 for the global tensors */
uint32_t ds_tiny_llama_attn_type(int layer);
/* The tokenizer's size (control + byte + merged tokens). */
int ds_tiny_llama_vocab(void);
/* The float master value of element `index` of a tensor (what was quantised). */
float ds_tiny_llama_weight(uint64_t seed, int layer, int kind, int64_t fan_in, int64_t index);
int ds_tiny_llama_write(const char *path, uint64_t seed, const ds_llama_config *shape, bool with_output,
                        char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
