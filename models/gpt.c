/* gpt.c - the GPT-2 model pieces on the device: parameters and their counter-RNG
 * initialisation, activation records and the workspace, the block's forward and its
 * backward split into B (input gradient) and W (weight gradients), the embedding, the loss
 * head and the cost of each phase. Plain C over the kernels/ dispatchers and pl_gemm, so
 * the same code runs on the cpu and the cuda device. */
#include "gpt.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "kern_attention.h" // defines: kern_attention_forward, kern_attention_backward
#include "kern_bias.h"      // defines: kern_bias_forward, kern_bias_backward, kern_bias_cost
#include "kern_embedding.h" // defines: kern_embedding_forward, kern_embedding_backward
#include "kern_gelu.h"      // defines: kern_gelu_forward, kern_gelu_backward, kern_gelu_cost
#include "kern_layernorm.h" // defines: kern_layernorm_forward, kern_layernorm_backward
#include "kern_residual.h"  // defines: kern_residual_forward, kern_residual_cost
#include "kern_softmax.h"   // defines: kern_softmax_cost (attention's softmax)
#include "kern_xent.h"      // defines: kern_xent_forward, kern_xent_backward, kern_xent_cost
#include "pl_runtime.h"     // defines: pl_fatal, PL_CHECK, PL_NORETURN
#include "pl_tensor.h"      // defines: pl_tensor_view
#include "pl_trace.h"       // defines: pl_region_begin, pl_region_end

/* The named tensors of each parameter struct must sit exactly where t[i] does. */
_Static_assert(offsetof(gpt_block_params, fc2_b) == GPT_FC2_B * sizeof(float *) &&
                   offsetof(gpt_block_params, base) == GPT_BLOCK_NTENSORS * sizeof(float *),
               "gpt_block_params: named tensors and t[] disagree");
_Static_assert(offsetof(gpt_embed_params, wpe) == GPT_WPE * sizeof(float *),
               "gpt_embed_params: named tensors and t[] disagree");
_Static_assert(offsetof(gpt_head_params, lm_w) == GPT_LM_W * sizeof(float *),
               "gpt_head_params: named tensors and t[] disagree");

/* ==================================================================================== */
/* Configuration and errors                                                               */
/* ==================================================================================== */

static void say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t n, const char *fmt, ...) {
    if (!why || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

/* A misuse of the API (a schedule bug, a mismatched config): one line, the job stops. */
#define fail(who, ...) pl_fatalf(__FILE__, __LINE__, (who), __VA_ARGS__)

bool gpt_config_valid(const gpt_config *c, char *why, size_t why_len) {
    if (!c) {
        say(why, why_len, "no config");
        return false;
    }
    if (c->seq < 1 || c->batch < 1 || c->hidden < 1 || c->heads < 1 || c->ffn < 1) {
        say(why, why_len, "seq %d, batch %d, hidden %d, heads %d and ffn %d must all be >= 1",
            c->seq, c->batch, c->hidden, c->heads, c->ffn);
        return false;
    }
    if (c->hidden % c->heads != 0) {
        say(why, why_len, "hidden %d is not a multiple of heads %d", c->hidden, c->heads);
        return false;
    }
    if (c->vocab < 0 || c->max_pos < 0) {
        say(why, why_len, "vocab %d and max_pos %d must be >= 0", c->vocab, c->max_pos);
        return false;
    }
    if (c->max_pos > 0 && c->max_pos < c->seq) {
        say(why, why_len, "max_pos %d is shorter than seq %d: every position needs a row", c->max_pos, c->seq);
        return false;
    }
    /* pl_gemm and the kernels take int sizes: every matrix one call sees must fit */
    double N = (double)c->seq * c->batch, C = c->hidden;
    double sizes[] = {N * 3 * C, N * c->ffn, (double)c->batch * c->heads * c->seq * c->seq,
                      N * c->vocab, 3 * C * C, C * c->ffn, C * c->vocab, C * c->max_pos};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] > INT_MAX) {
            say(why, why_len, "model too large: a %.0f-element matrix exceeds the int sizes of the kernels", sizes[i]);
            return false;
        }
    return true;
}

bool gpt_ids_valid(const int *host, size_t n, int vocab, char *why, size_t why_len) {
    for (size_t i = 0; i < n; i++)
        if (host[i] < 0 || host[i] >= vocab) {
            say(why, why_len, "id %d at index %zu is outside [0, %d)", host[i], i, vocab);
            return false;
        }
    return true;
}

enum { NEED_BLOCK = 0, NEED_VOCAB = 1, NEED_POSITIONS = 2 };

static void require(const gpt_config *c, int needs, const char *who) {
    char why[200];
    if (!gpt_config_valid(c, why, sizeof why)) fail(who, "%s", why);
    if ((needs & NEED_VOCAB) && c->vocab < 1)
        fail(who, "vocab is %d: the embedding and the head need a vocabulary", c->vocab);
    if ((needs & NEED_POSITIONS) && c->max_pos < c->seq)
        fail(who, "max_pos %d < seq %d: the position table needs a row per position", c->max_pos, c->seq);
}

typedef struct {
    int T, B, C, H, F, V, hs, N;
    size_t NC, NF, probs; /* N*C, N*F, b*H*T*T */
    float scale;          /* 1/sqrt(hs), attention's */
} dims;

static dims dims_of(const gpt_config *c) {
    dims d = {.T = c->seq, .B = c->batch, .C = c->hidden, .H = c->heads, .F = c->ffn, .V = c->vocab};
    d.hs = d.C / d.H;
    d.N = d.T * d.B;
    d.NC = (size_t)d.N * d.C;
    d.NF = (size_t)d.N * d.F;
    d.probs = (size_t)d.B * d.H * d.T * d.T;
    d.scale = 1.0f / sqrtf((float)d.hs);
    return d;
}

static bool same_block_shape(const gpt_config *a, const gpt_config *b) {
    return a->seq == b->seq && a->batch == b->batch && a->hidden == b->hidden &&
           a->heads == b->heads && a->ffn == b->ffn;
}

/* ==================================================================================== */
/* Parameters                                                                             */
/* ==================================================================================== */

static const char *const BLOCK_NAMES[GPT_BLOCK_NTENSORS] = {
    "ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
    "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};
static const char *const EMBED_NAMES[GPT_EMBED_NTENSORS] = {"wte", "wpe"};
static const char *const HEAD_NAMES[GPT_HEAD_NTENSORS] = {"lnf.w", "lnf.b", "lm.w"};

int gpt_part_ntensors(gpt_part part) {
    switch (part) {
    case GPT_PART_BLOCK: return GPT_BLOCK_NTENSORS;
    case GPT_PART_EMBED: return GPT_EMBED_NTENSORS;
    case GPT_PART_HEAD: return GPT_HEAD_NTENSORS;
    }
    return 0;
}

/* What a tensor is, for its shape and its initialisation. */
typedef enum { KIND_LN_W, KIND_LN_B, KIND_LINEAR, KIND_TOKEN, KIND_POSITION } tensor_kind;

/* Shape, kind and fan-in (the input width of the linear layer it belongs to). */
static void describe(const gpt_config *c, gpt_part part, int which, int64_t *rows, int64_t *cols,
                     tensor_kind *kind, int64_t *fan_in) {
    int64_t C = c->hidden, F = c->ffn, V = c->vocab, P = c->max_pos;
    if (part == GPT_PART_BLOCK) {
        static const tensor_kind K[GPT_BLOCK_NTENSORS] = {
            KIND_LN_W, KIND_LN_B, KIND_LINEAR, KIND_LINEAR, KIND_LINEAR, KIND_LINEAR,
            KIND_LN_W, KIND_LN_B, KIND_LINEAR, KIND_LINEAR, KIND_LINEAR, KIND_LINEAR};
        const int64_t R[GPT_BLOCK_NTENSORS] = {1, 1, 3 * C, 1, C, 1, 1, 1, F, 1, C, 1};
        const int64_t N[GPT_BLOCK_NTENSORS] = {C, C, C, 3 * C, C, C, C, C, C, F, F, C};
        const int64_t IN[GPT_BLOCK_NTENSORS] = {0, 0, C, C, C, C, 0, 0, C, C, F, F};
        *rows = R[which], *cols = N[which], *kind = K[which], *fan_in = IN[which];
    } else if (part == GPT_PART_EMBED) {
        *rows = which == GPT_WTE ? V : P, *cols = C;
        *kind = which == GPT_WTE ? KIND_TOKEN : KIND_POSITION, *fan_in = 0;
    } else {
        static const tensor_kind K[GPT_HEAD_NTENSORS] = {KIND_LN_W, KIND_LN_B, KIND_LINEAR};
        *rows = which == GPT_LM_W ? V : 1, *cols = C, *kind = K[which], *fan_in = C;
    }
}

gpt_tensor_info gpt_tensor(const gpt_config *c, gpt_part part, int which, int layer) {
    int n = gpt_part_ntensors(part);
    if (which < 0 || which >= n) fail("gpt_tensor", "tensor %d of a part with %d tensors", which, n);
    if (layer < 0 || (part != GPT_PART_BLOCK && layer != 0))
        fail("gpt_tensor", "layer %d: blocks have layers >= 0, the embedding and head only 0", layer);
    gpt_tensor_info ti = {0};
    for (int i = 0; i <= which; i++) {
        int64_t rows, cols, fan_in;
        tensor_kind kind;
        describe(c, part, i, &rows, &cols, &kind, &fan_in);
        if (i < which) {
            ti.offset += (size_t)(rows * cols);
            continue;
        }
        ti.rows = rows, ti.cols = cols;
        ti.name = part == GPT_PART_BLOCK ? BLOCK_NAMES[i] : part == GPT_PART_EMBED ? EMBED_NAMES[i] : HEAD_NAMES[i];
        ti.rng_id = ((uint64_t)(1 + part) << 32) + 16u * (uint64_t)layer + (uint64_t)i;
        /* layer-norm parameters away from 1 and 0, so a swapped or dropped one shows */
        switch (kind) {
        case KIND_LN_W: ti.dist = PL_RNG_UNIFORM, ti.lo = 0.8f, ti.hi = 1.2f; break;
        case KIND_LN_B: ti.dist = PL_RNG_UNIFORM, ti.lo = -0.1f, ti.hi = 0.1f; break;
        case KIND_LINEAR: { /* nn.Linear's default bound, 1/sqrt(fan-in), for weight and bias */
            float bound = 1.0f / sqrtf((float)fan_in);
            ti.dist = PL_RNG_UNIFORM, ti.lo = -bound, ti.hi = bound;
            break;
        }
        case KIND_TOKEN: ti.dist = PL_RNG_NORMAL, ti.lo = 0.0f, ti.hi = 0.02f; break; /* GPT-2's */
        case KIND_POSITION: ti.dist = PL_RNG_NORMAL, ti.lo = 0.0f, ti.hi = 0.01f; break;
        }
    }
    return ti;
}

size_t gpt_part_count(const gpt_config *c, gpt_part part) {
    int last = gpt_part_ntensors(part) - 1;
    gpt_tensor_info ti = gpt_tensor(c, part, last, 0);
    return ti.offset + (size_t)(ti.rows * ti.cols);
}

static void params_alloc(float **t, float **base, size_t *count, const gpt_config *c,
                         gpt_part part, const char *who) {
    require(c, part == GPT_PART_BLOCK ? NEED_BLOCK : part == GPT_PART_EMBED ? NEED_VOCAB | NEED_POSITIONS : NEED_VOCAB, who);
    *count = gpt_part_count(c, part);
    *base = pl_malloc_floats(*count);
    for (int i = 0; i < gpt_part_ntensors(part); i++) t[i] = *base + gpt_tensor(c, part, i, 0).offset;
}

static void params_init(float *const *t, size_t count, const gpt_config *c, gpt_part part,
                        int layer, uint64_t seed, const char *who) {
    if (count != gpt_part_count(c, part))
        fail(who, "the parameters hold %zu floats, this config needs %zu: allocated for another config",
             count, gpt_part_count(c, part));
    for (int i = 0; i < gpt_part_ntensors(part); i++) {
        gpt_tensor_info ti = gpt_tensor(c, part, i, layer);
        pl_rng_fill(pl_tensor_view(t[i], ti.rows, ti.cols), ti.cols, 0, 0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
    }
}

void gpt_block_params_alloc(gpt_block_params *p, const gpt_config *c) {
    params_alloc(p->t, &p->base, &p->count, c, GPT_PART_BLOCK, "gpt_block_params_alloc");
}
void gpt_embed_params_alloc(gpt_embed_params *p, const gpt_config *c) {
    params_alloc(p->t, &p->base, &p->count, c, GPT_PART_EMBED, "gpt_embed_params_alloc");
}
void gpt_head_params_alloc(gpt_head_params *p, const gpt_config *c) {
    params_alloc(p->t, &p->base, &p->count, c, GPT_PART_HEAD, "gpt_head_params_alloc");
}
void gpt_block_params_free(gpt_block_params *p) {
    pl_free(p->base);
    *p = (gpt_block_params){0};
}
void gpt_embed_params_free(gpt_embed_params *p) {
    pl_free(p->base);
    *p = (gpt_embed_params){0};
}
void gpt_head_params_free(gpt_head_params *p) {
    pl_free(p->base);
    *p = (gpt_head_params){0};
}
void gpt_block_init(gpt_block_params *p, const gpt_config *c, int layer, uint64_t seed) {
    params_init(p->t, p->count, c, GPT_PART_BLOCK, layer, seed, "gpt_block_init");
}
void gpt_embed_init(gpt_embed_params *p, const gpt_config *c, uint64_t seed) {
    params_init(p->t, p->count, c, GPT_PART_EMBED, 0, seed, "gpt_embed_init");
}
void gpt_head_init(gpt_head_params *p, const gpt_config *c, uint64_t seed) {
    params_init(p->t, p->count, c, GPT_PART_HEAD, 0, seed, "gpt_head_init");
}

/* ==================================================================================== */
/* Activation records and the workspace                                                   */
/* ==================================================================================== */

/* The activations one forward produces and the backward reads. */
typedef struct {
    float *x, *ln1, *mean1, *rstd1, *qkv, *probs, *att, *x1, *ln2, *mean2, *rstd2, *fc1, *gel;
} fwd_view;

/* The gradients B produces for W: into fc2 (dy), fc1 (dfc1), ln2 (dh2), proj (dx1), qkv
 * (dqkv) and ln1 (dh1). */
typedef struct {
    const float *dy;
    float *dfc1, *dh2, *dx1, *dqkv, *dh1;
} grad_view;

/* Lay out a set of activations or gradients from base, or only count its floats when the
 * view is NULL. [N, C]-sized tensors come first and the [N] statistics last, so with C and
 * F multiples of 4 every big tensor starts 16-byte aligned for the kernels' vector loads. */
#define TAKE(view, field, n)                           \
    do {                                               \
        if (view) (view)->field = base + off;          \
        off += (n);                                    \
    } while (0)

static size_t fwd_carve(fwd_view *v, float *base, const dims *d, bool with_x) {
    size_t off = 0;
    if (with_x) TAKE(v, x, d->NC);
    TAKE(v, ln1, d->NC);
    TAKE(v, att, d->NC);
    TAKE(v, x1, d->NC);
    TAKE(v, ln2, d->NC);
    TAKE(v, qkv, 3 * d->NC);
    TAKE(v, fc1, d->NF);
    TAKE(v, gel, d->NF);
    TAKE(v, probs, d->probs);
    TAKE(v, mean1, (size_t)d->N);
    TAKE(v, rstd1, (size_t)d->N);
    TAKE(v, mean2, (size_t)d->N);
    TAKE(v, rstd2, (size_t)d->N);
    return off;
}

/* with_dy: the record keeps its own copy of dy; the fused backward reads the caller's. */
static size_t grad_carve(grad_view *g, float **dy, float *base, const dims *d, bool with_dy) {
    size_t off = 0;
    if (with_dy) {
        if (g) *dy = base, g->dy = base;
        off += d->NC;
    }
    TAKE(g, dh2, d->NC);
    TAKE(g, dx1, d->NC);
    TAKE(g, dh1, d->NC);
    TAKE(g, dqkv, 3 * d->NC);
    TAKE(g, dfc1, d->NF);
    return off;
}
#undef TAKE

enum { REC_EMPTY, REC_FORWARD, REC_AWAITING_W };

struct gpt_acts {
    gpt_config cfg;
    bool recompute;
    int state;      /* REC_*: which call may come next                              */
    float *stash;   /* gpt_acts_bytes: f's tensors (only x with recompute)          */
    fwd_view f;
    float *wstash;  /* gpt_acts_wstash_bytes, from the first B on                   */
    float *dy_copy; /* its first tensor: B's copy of dy                              */
    grad_view w;
};

struct gpt_workspace {
    gpt_config cfg;
    unsigned parts;
    float *base;
    grad_view g;    /* the fused backward's gradients (g.dy unused: the caller's)   */
    float *datt;    /* [N, C] gradient into attention's output; in W, the sink of
                       the layer norms' input gradients, which W does not need      */
    float *dprobs;  /* [b, H, T, T] attention backward's scratch                    */
    float *ln_sink; /* [2C] the layer-norm parameter gradients B computes and drops  */
    fwd_view f;     /* GPT_WS_RECOMPUTE: rebuilt activations (x stays in the record) */
    float *logits;  /* GPT_WS_HEAD: [N, V], then their gradient                     */
    float *dlnf;    /* GPT_WS_HEAD: [N, C]                                           */
};

size_t gpt_acts_bytes(const gpt_config *c, bool recompute) {
    require(c, NEED_BLOCK, "gpt_acts_bytes");
    dims d = dims_of(c);
    return sizeof(float) * (recompute ? d.NC : fwd_carve(NULL, NULL, &d, true));
}

size_t gpt_acts_wstash_bytes(const gpt_config *c) {
    require(c, NEED_BLOCK, "gpt_acts_wstash_bytes");
    dims d = dims_of(c);
    return sizeof(float) * grad_carve(NULL, NULL, NULL, &d, true);
}

gpt_acts *gpt_acts_alloc(const gpt_config *c, bool recompute) {
    require(c, NEED_BLOCK, "gpt_acts_alloc");
    gpt_acts *a = calloc(1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    dims d = dims_of(c);
    a->cfg = *c;
    a->recompute = recompute;
    a->stash = pl_malloc(gpt_acts_bytes(c, recompute));
    if (recompute) a->f.x = a->stash;
    else fwd_carve(&a->f, a->stash, &d, true);
    return a;
}

void gpt_acts_free(gpt_acts *a) {
    if (!a) return;
    pl_free(a->stash);
    pl_free(a->wstash);
    free(a);
}

void gpt_acts_reset(gpt_acts *a) {
    if (a) a->state = REC_EMPTY;
}

static size_t ws_floats(const dims *d, unsigned parts) {
    size_t block = grad_carve(NULL, NULL, NULL, d, false) + d->NC + d->probs + 2 * (size_t)d->C;
    size_t rebuild = (parts & GPT_WS_RECOMPUTE) ? fwd_carve(NULL, NULL, d, false) : 0;
    size_t head = (parts & GPT_WS_HEAD) ? (size_t)d->N * ((size_t)d->V + d->C) : 0;
    return block + rebuild + head;
}

size_t gpt_workspace_bytes(const gpt_config *c, unsigned parts) {
    require(c, (parts & GPT_WS_HEAD) ? NEED_VOCAB : NEED_BLOCK, "gpt_workspace_bytes");
    dims d = dims_of(c);
    return sizeof(float) * ws_floats(&d, parts);
}

gpt_workspace *gpt_workspace_alloc(const gpt_config *c, unsigned parts) {
    require(c, (parts & GPT_WS_HEAD) ? NEED_VOCAB : NEED_BLOCK, "gpt_workspace_alloc");
    gpt_workspace *ws = calloc(1, sizeof *ws);
    PL_CHECK(ws != NULL, "out of host memory");
    dims d = dims_of(c);
    ws->cfg = *c;
    ws->parts = parts;
    ws->base = pl_malloc_floats(ws_floats(&d, parts));
    float *p = ws->base;
    p += grad_carve(&ws->g, NULL, p, &d, false);
    ws->datt = p, p += d.NC;
    ws->dprobs = p, p += d.probs;
    ws->ln_sink = p, p += 2 * (size_t)d.C;
    if (parts & GPT_WS_RECOMPUTE) p += fwd_carve(&ws->f, p, &d, false);
    if (parts & GPT_WS_HEAD) {
        ws->logits = p, p += (size_t)d.N * d.V;
        ws->dlnf = p;
    }
    /* B accumulates into the sink and never reads it: start it at a finite value */
    pl_fill(ws->ln_sink, 0.0f, 2 * (size_t)d.C, NULL);
    return ws;
}

void gpt_workspace_free(gpt_workspace *ws) {
    if (!ws) return;
    pl_free(ws->base);
    free(ws);
}

/* The activations of a record: its own, or with recomputation x from the record and the
 * rest in the workspace. */
static fwd_view activations(const gpt_acts *a, const gpt_workspace *ws) {
    if (!a->recompute) return a->f;
    fwd_view v = ws->f;
    v.x = a->f.x;
    return v;
}

/* Parameters, record and workspace must all belong to one config. */
static void check_call(const char *who, const gpt_block_params *p, const gpt_acts *a,
                       const gpt_workspace *ws) {
    if (!p || !a || !ws) fail(who, "NULL parameters, record or workspace");
    size_t want = gpt_part_count(&a->cfg, GPT_PART_BLOCK);
    if (p->count != want)
        fail(who, "the parameters hold %zu floats, the record's config needs %zu", p->count, want);
    if (!same_block_shape(&a->cfg, &ws->cfg))
        fail(who, "record and workspace were allocated for different configs");
    if (a->recompute && !(ws->parts & GPT_WS_RECOMPUTE))
        fail(who, "the record recomputes but the workspace has no room for the rebuilt activations (allocate it with GPT_WS_RECOMPUTE)");
}

static const char *state_name(int state) {
    switch (state) {
    case REC_EMPTY: return "holds no forward (run gpt_block_forward first)";
    case REC_FORWARD: return "holds a forward that has not been through its backward (gpt_acts_reset drops it)";
    default: return "waits for its W (gpt_block_backward_weight)";
    }
}

static void expect_state(const char *who, const gpt_acts *a, int want) {
    static const char *const needs[] = {"a forward needs a free record", "the backward needs the record's forward",
                                        "W needs the record's B (gpt_block_backward_input) first"};
    if (a->state != want) fail(who, "%s, and this activation record %s", needs[want], state_name(a->state));
}

/* ==================================================================================== */
/* The block                                                                              */
/* ==================================================================================== */

static uint64_t g_recomputes;
uint64_t gpt_recompute_count(void) { return g_recomputes; }

/* y[N, out] = x[N, in] W^T + b, W [out, in] */
static void linear_forward(float *y, const float *x, const float *w, const float *b, int N,
                           int in, int out, pl_stream *s) {
    pl_gemm(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, s);
    kern_bias_forward(y, b, N, out, s);
}
/* dx[N, in] = dy[N, out] W: B's GEMM */
static void linear_backward_input(float *dx, const float *dy, const float *w, int N, int in,
                                  int out, pl_stream *s) {
    pl_gemm(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, s);
}
/* dW[out, in] += dy^T x, db += column sums of dy: W's GEMM */
static void linear_backward_weight(float *dw, float *db, const float *dy, const float *x, int N,
                                   int in, int out, pl_stream *s) {
    kern_bias_backward(db, dy, N, out, s);
    pl_gemm(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, s);
}

/* The forward into v (v->x already holds the input). y == NULL: a rebuild for the
 * backward, which stops at gel: nothing reads the output projection. */
static void forward_core(const gpt_block_params *p, const fwd_view *v, float *y, const dims *d,
                         pl_stream *s) {
    int N = d->N, C = d->C, F = d->F;
    kern_layernorm_forward(v->ln1, v->mean1, v->rstd1, v->x, p->ln1_w, p->ln1_b, N, C, GPT_LN_EPS, s);
    linear_forward(v->qkv, v->ln1, p->qkv_w, p->qkv_b, N, C, 3 * C, s);
    kern_attention_forward(v->att, v->probs, v->qkv, d->T, d->B, d->H, d->hs, d->scale, s);
    linear_forward(v->x1, v->att, p->proj_w, p->proj_b, N, C, C, s);
    kern_residual_forward(v->x1, v->x, v->x1, d->NC, s);
    kern_layernorm_forward(v->ln2, v->mean2, v->rstd2, v->x1, p->ln2_w, p->ln2_b, N, C, GPT_LN_EPS, s);
    linear_forward(v->fc1, v->ln2, p->fc1_w, p->fc1_b, N, C, F, s);
    kern_gelu_forward(v->gel, v->fc1, d->NF, s);
    if (!y) return;
    linear_forward(y, v->gel, p->fc2_w, p->fc2_b, N, F, C, s);
    kern_residual_forward(y, v->x1, y, d->NC, s);
}

/* B: from g->dy, every gradient into g and dx; the layer norms' parameter gradients go to
 * the workspace's sink (W computes the real ones). */
static void backward_input_core(const gpt_block_params *p, const fwd_view *v, const grad_view *g,
                                float *dx, gpt_workspace *ws, const dims *d, pl_stream *s) {
    int N = d->N, C = d->C, F = d->F;
    float *sink_w = ws->ln_sink, *sink_b = ws->ln_sink + C;
    /* MLP half: y = x1 + fc2(gelu(fc1(ln2(x1)))) */
    linear_backward_input(g->dfc1, g->dy, p->fc2_w, N, F, C, s);
    kern_gelu_backward(g->dfc1, g->dfc1, v->fc1, d->NF, s);
    linear_backward_input(g->dh2, g->dfc1, p->fc1_w, N, C, F, s);
    kern_layernorm_backward(g->dx1, sink_w, sink_b, g->dh2, v->x1, p->ln2_w, v->mean2, v->rstd2, N, C, s);
    kern_residual_forward(g->dx1, g->dx1, g->dy, d->NC, s); /* the residual branch */
    /* attention half: x1 = x + proj(attention(qkv(ln1(x)))) */
    linear_backward_input(ws->datt, g->dx1, p->proj_w, N, C, C, s);
    kern_attention_backward(g->dqkv, ws->dprobs, ws->datt, v->qkv, v->probs, d->T, d->B, d->H, d->hs, d->scale, s);
    linear_backward_input(g->dh1, g->dqkv, p->qkv_w, N, C, 3 * C, s);
    kern_layernorm_backward(dx, sink_w, sink_b, g->dh1, v->x, p->ln1_w, v->mean1, v->rstd1, N, C, s);
    kern_residual_forward(dx, dx, g->dx1, d->NC, s);
}

/* W: every parameter gradient from B's gradients and the forward's activations. The layer
 * norms' input gradients are recomputed alongside and dropped (an elementwise kernel, not
 * a GEMM). */
static void backward_weight_core(const gpt_block_params *p, gpt_block_params *gp, const fwd_view *v,
                                 const grad_view *g, gpt_workspace *ws, const dims *d, pl_stream *s) {
    int N = d->N, C = d->C, F = d->F;
    linear_backward_weight(gp->fc2_w, gp->fc2_b, g->dy, v->gel, N, F, C, s);
    linear_backward_weight(gp->fc1_w, gp->fc1_b, g->dfc1, v->ln2, N, C, F, s);
    kern_layernorm_backward(ws->datt, gp->ln2_w, gp->ln2_b, g->dh2, v->x1, p->ln2_w, v->mean2, v->rstd2, N, C, s);
    linear_backward_weight(gp->proj_w, gp->proj_b, g->dx1, v->att, N, C, C, s);
    linear_backward_weight(gp->qkv_w, gp->qkv_b, g->dqkv, v->ln1, N, C, 3 * C, s);
    kern_layernorm_backward(ws->datt, gp->ln1_w, gp->ln1_b, g->dh1, v->x, p->ln1_w, v->mean1, v->rstd1, N, C, s);
}

/* The activations the backward reads: rebuilt from x first when the record recomputes. */
static fwd_view backward_activations(const gpt_block_params *p, const gpt_acts *a, gpt_workspace *ws,
                                     const dims *d, pl_stream *s) {
    fwd_view v = activations(a, ws);
    if (a->recompute) {
        pl_region_begin("gpt.block.R");
        forward_core(p, &v, NULL, d, s);
        pl_region_end();
        g_recomputes++;
    }
    return v;
}

void gpt_block_forward(const gpt_block_params *p, gpt_acts *a, float *y, const float *x,
                       gpt_workspace *ws, pl_stream *s) {
    const char *who = "gpt_block_forward";
    check_call(who, p, a, ws);
    if (!x || !y) fail(who, "NULL input or output");
    expect_state(who, a, REC_EMPTY);
    dims d = dims_of(&a->cfg);
    pl_region_begin("gpt.block.F");
    pl_copy(a->f.x, x, d.NC * sizeof(float), s);
    fwd_view v = activations(a, ws);
    forward_core(p, &v, y, &d, s);
    pl_region_end();
    a->state = REC_FORWARD;
}

void gpt_block_backward_input(const gpt_block_params *p, gpt_acts *a, float *dx, const float *dy,
                              gpt_workspace *ws, pl_stream *s) {
    const char *who = "gpt_block_backward_input";
    check_call(who, p, a, ws);
    if (!dx || !dy || dx == dy) fail(who, "dx and dy must be two distinct buffers");
    expect_state(who, a, REC_FORWARD);
    dims d = dims_of(&a->cfg);
    if (!a->wstash) {
        a->wstash = pl_malloc(gpt_acts_wstash_bytes(&a->cfg));
        grad_carve(&a->w, &a->dy_copy, a->wstash, &d, true);
    }
    pl_region_begin("gpt.block.B");
    fwd_view v = backward_activations(p, a, ws, &d, s);
    /* the caller's dy buffer is free again once B returns; W still needs dy */
    pl_copy(a->dy_copy, dy, d.NC * sizeof(float), s);
    backward_input_core(p, &v, &a->w, dx, ws, &d, s);
    pl_region_end();
    a->state = REC_AWAITING_W;
}

void gpt_block_backward_weight(const gpt_block_params *p, gpt_block_params *g, gpt_acts *a,
                               gpt_workspace *ws, pl_stream *s) {
    const char *who = "gpt_block_backward_weight";
    check_call(who, p, a, ws);
    if (!g || g->count != p->count) fail(who, "the gradient does not have the parameters' shape");
    expect_state(who, a, REC_AWAITING_W);
    dims d = dims_of(&a->cfg);
    pl_region_begin("gpt.block.W");
    fwd_view v = backward_activations(p, a, ws, &d, s);
    backward_weight_core(p, g, &v, &a->w, ws, &d, s);
    pl_region_end();
    a->state = REC_EMPTY;
}

void gpt_block_backward(const gpt_block_params *p, gpt_block_params *g, gpt_acts *a, float *dx,
                        const float *dy, gpt_workspace *ws, pl_stream *s) {
    const char *who = "gpt_block_backward";
    check_call(who, p, a, ws);
    if (!g || g->count != p->count) fail(who, "the gradient does not have the parameters' shape");
    /* W reads dy after B has written dx */
    if (!dx || !dy || dx == dy) fail(who, "dx and dy must be two distinct buffers");
    expect_state(who, a, REC_FORWARD);
    dims d = dims_of(&a->cfg);
    grad_view gv = ws->g;
    gv.dy = dy;
    pl_region_begin("gpt.block.BW");
    fwd_view v = backward_activations(p, a, ws, &d, s);
    backward_input_core(p, &v, &gv, dx, ws, &d, s);
    backward_weight_core(p, g, &v, &gv, ws, &d, s);
    pl_region_end();
    a->state = REC_EMPTY;
}

/* ==================================================================================== */
/* Costs: the same calls as above, priced the way pl_gemm and the kernels record them     */
/* ==================================================================================== */

typedef struct {
    double flops, bytes;
} tally;

static void add_gemms(tally *t, double count, double m, double n, double k) {
    t->flops += count * 2.0 * m * n * k;
    t->bytes += count * 4.0 * (m * k + k * n + m * n);
}
#define ADD_KERNEL(t, cost_call)  \
    do {                          \
        double b_, f_;            \
        cost_call;                \
        (t)->bytes += b_;         \
        (t)->flops += f_;         \
    } while (0)
static void add_copy(tally *t, double bytes) { t->bytes += 2.0 * bytes; }

static void cost_linear_forward(tally *t, int N, int in, int out) {
    add_gemms(t, 1, N, out, in);
    ADD_KERNEL(t, kern_bias_cost(N, out, 0, &b_, &f_));
}

static void cost_forward(tally *t, const dims *d, bool whole) {
    int N = d->N, C = d->C, F = d->F, R = d->B * d->H;
    ADD_KERNEL(t, kern_layernorm_cost(N, C, 0, &b_, &f_));
    cost_linear_forward(t, N, C, 3 * C);
    add_gemms(t, R, d->T, d->T, d->hs); /* scores = q k^T per head */
    ADD_KERNEL(t, kern_softmax_cost(R, d->T, 0, &b_, &f_));
    add_gemms(t, R, d->T, d->hs, d->T); /* out = probs v per head */
    cost_linear_forward(t, N, C, C);
    ADD_KERNEL(t, kern_residual_cost(d->NC, 0, &b_, &f_));
    ADD_KERNEL(t, kern_layernorm_cost(N, C, 0, &b_, &f_));
    cost_linear_forward(t, N, C, F);
    ADD_KERNEL(t, kern_gelu_cost(d->NF, 0, &b_, &f_));
    if (!whole) return;
    cost_linear_forward(t, N, F, C);
    ADD_KERNEL(t, kern_residual_cost(d->NC, 0, &b_, &f_));
}

static void cost_backward_input(tally *t, const dims *d) {
    int N = d->N, C = d->C, F = d->F, R = d->B * d->H;
    add_gemms(t, 1, N, F, C);
    ADD_KERNEL(t, kern_gelu_cost(d->NF, 1, &b_, &f_));
    add_gemms(t, 1, N, C, F);
    ADD_KERNEL(t, kern_layernorm_cost(N, C, 1, &b_, &f_));
    ADD_KERNEL(t, kern_residual_cost(d->NC, 0, &b_, &f_));
    add_gemms(t, 1, N, C, C);
    add_gemms(t, R, d->T, d->T, d->hs); /* dprobs = dout v^T */
    add_gemms(t, R, d->T, d->hs, d->T); /* dv = probs^T dout */
    ADD_KERNEL(t, kern_softmax_cost(R, d->T, 1, &b_, &f_));
    add_gemms(t, 2 * (double)R, d->T, d->hs, d->T); /* dq, dk */
    add_gemms(t, 1, N, C, 3 * C);
    ADD_KERNEL(t, kern_layernorm_cost(N, C, 1, &b_, &f_));
    ADD_KERNEL(t, kern_residual_cost(d->NC, 0, &b_, &f_));
}

static void cost_linear_weight(tally *t, int N, int in, int out) {
    ADD_KERNEL(t, kern_bias_cost(N, out, 1, &b_, &f_));
    add_gemms(t, 1, out, in, N);
}

static void cost_backward_weight(tally *t, const dims *d) {
    int N = d->N, C = d->C, F = d->F;
    cost_linear_weight(t, N, F, C);
    cost_linear_weight(t, N, C, F);
    ADD_KERNEL(t, kern_layernorm_cost(N, C, 1, &b_, &f_));
    cost_linear_weight(t, N, C, C);
    cost_linear_weight(t, N, C, 3 * C);
    ADD_KERNEL(t, kern_layernorm_cost(N, C, 1, &b_, &f_));
}

void gpt_block_cost(const gpt_config *c, gpt_phase phase, double *flops, double *bytes) {
    require(c, NEED_BLOCK, "gpt_block_cost");
    dims d = dims_of(c);
    tally t = {0, 0};
    switch (phase) {
    case GPT_PHASE_F:
        add_copy(&t, 4.0 * d.NC); /* x into the record */
        cost_forward(&t, &d, true);
        break;
    case GPT_PHASE_R: cost_forward(&t, &d, false); break;
    case GPT_PHASE_B:
        add_copy(&t, 4.0 * d.NC); /* dy into the record */
        cost_backward_input(&t, &d);
        break;
    case GPT_PHASE_W: cost_backward_weight(&t, &d); break;
    case GPT_PHASE_BW:
        cost_backward_input(&t, &d);
        cost_backward_weight(&t, &d);
        break;
    default: fail("gpt_block_cost", "unknown phase %d", (int)phase);
    }
    *flops = t.flops;
    *bytes = t.bytes;
}

/* ==================================================================================== */
/* Embedding                                                                              */
/* ==================================================================================== */

void gpt_embed_forward(const gpt_config *c, const gpt_embed_params *p, float *x, const int *tokens,
                       pl_stream *s) {
    require(c, NEED_VOCAB | NEED_POSITIONS, "gpt_embed_forward");
    if (!p || p->count != gpt_part_count(c, GPT_PART_EMBED))
        fail("gpt_embed_forward", "the embedding was allocated for another config");
    kern_embedding_forward(x, tokens, p->wte, p->wpe, c->seq, c->batch, c->hidden, 0, s);
}

void gpt_embed_backward(const gpt_config *c, gpt_embed_params *g, const float *dx, const int *tokens,
                        pl_stream *s) {
    require(c, NEED_VOCAB | NEED_POSITIONS, "gpt_embed_backward");
    if (!g || g->count != gpt_part_count(c, GPT_PART_EMBED))
        fail("gpt_embed_backward", "the gradient was allocated for another config");
    kern_embedding_backward(g->wte, g->wpe, dx, tokens, c->seq, c->batch, c->hidden, 0, s);
}

void gpt_embed_cost(const gpt_config *c, bool backward, double *flops, double *bytes) {
    require(c, NEED_VOCAB | NEED_POSITIONS, "gpt_embed_cost");
    kern_embedding_cost(c->seq, c->batch, c->hidden, backward, bytes, flops);
}

/* ==================================================================================== */
/* Loss head                                                                              */
/* ==================================================================================== */

struct gpt_head_acts {
    gpt_config cfg;
    bool ready;          /* a forward waits for its backward */
    float *base;         /* gpt_head_acts_bytes */
    float *x, *lnf;      /* [N, C] */
    float *probs;        /* [N, V] */
    float *losses, *mean, *rstd; /* [N] */
    int *targets;        /* [N] */
};

size_t gpt_head_acts_bytes(const gpt_config *c) {
    require(c, NEED_VOCAB, "gpt_head_acts_bytes");
    dims d = dims_of(c);
    return sizeof(float) * ((size_t)d.N * (2 * (size_t)d.C + d.V + 3)) + sizeof(int) * (size_t)d.N;
}

gpt_head_acts *gpt_head_acts_alloc(const gpt_config *c) {
    require(c, NEED_VOCAB, "gpt_head_acts_alloc");
    gpt_head_acts *a = calloc(1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    dims d = dims_of(c);
    a->cfg = *c;
    a->base = pl_malloc(gpt_head_acts_bytes(c));
    float *p = a->base;
    a->x = p, p += d.NC;
    a->lnf = p, p += d.NC;
    a->probs = p, p += (size_t)d.N * d.V;
    a->losses = p, p += d.N;
    a->mean = p, p += d.N;
    a->rstd = p, p += d.N;
    a->targets = (int *)p; /* ints and floats are both 4 bytes: one allocation */
    return a;
}

void gpt_head_acts_free(gpt_head_acts *a) {
    if (!a) return;
    pl_free(a->base);
    free(a);
}

static void check_head(const char *who, const gpt_head_params *p, const gpt_head_acts *a,
                       const gpt_workspace *ws) {
    if (!p || !a || !ws) fail(who, "NULL parameters, record or workspace");
    if (p->count != gpt_part_count(&a->cfg, GPT_PART_HEAD))
        fail(who, "the head's parameters were allocated for another config");
    if (!(ws->parts & GPT_WS_HEAD) || !same_block_shape(&a->cfg, &ws->cfg) || ws->cfg.vocab != a->cfg.vocab)
        fail(who, "the workspace has no head part for this config (allocate it with GPT_WS_HEAD)");
}

double gpt_head_forward(const gpt_head_params *p, gpt_head_acts *a, const float *x,
                        const int *targets, gpt_workspace *ws, pl_stream *s) {
    const char *who = "gpt_head_forward";
    check_head(who, p, a, ws);
    if (!x || !targets) fail(who, "NULL input or targets");
    dims d = dims_of(&a->cfg);
    int N = d.N, C = d.C, V = d.V;
    pl_region_begin("gpt.head.F");
    pl_copy(a->x, x, d.NC * sizeof(float), s);
    pl_copy(a->targets, targets, (size_t)N * sizeof(int), s);
    kern_layernorm_forward(a->lnf, a->mean, a->rstd, a->x, p->lnf_w, p->lnf_b, N, C, GPT_LN_EPS, s);
    pl_gemm(false, true, N, V, C, 1.0f, a->lnf, C, p->lm_w, C, 0.0f, ws->logits, V, s);
    kern_xent_forward(a->losses, a->probs, ws->logits, a->targets, N, V, s);
    pl_region_end();
    a->ready = true;
    float *losses = malloc((size_t)N * sizeof(float));
    PL_CHECK(losses != NULL, "out of host memory");
    pl_download(losses, a->losses, (size_t)N * sizeof(float));
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    free(losses);
    return sum / N;
}

void gpt_head_backward(const gpt_head_params *p, gpt_head_params *g, gpt_head_acts *a, float *dx,
                       float loss_scale, gpt_workspace *ws, pl_stream *s) {
    const char *who = "gpt_head_backward";
    check_head(who, p, a, ws);
    if (!g || g->count != p->count) fail(who, "the gradient does not have the parameters' shape");
    if (!dx) fail(who, "NULL dx");
    if (!a->ready) fail(who, "the head's record holds no forward");
    dims d = dims_of(&a->cfg);
    int N = d.N, C = d.C, V = d.V;
    float *dlogits = ws->logits; /* the logits are dead once the probabilities exist */
    pl_region_begin("gpt.head.B");
    kern_xent_backward(dlogits, a->probs, a->targets, N, V, s);
    pl_scale(dlogits, loss_scale, (size_t)N * V, s);
    pl_gemm(true, false, V, C, N, 1.0f, dlogits, V, a->lnf, C, 1.0f, g->lm_w, C, s);
    pl_gemm(false, false, N, C, V, 1.0f, dlogits, V, p->lm_w, C, 0.0f, ws->dlnf, C, s);
    kern_layernorm_backward(dx, g->lnf_w, g->lnf_b, ws->dlnf, a->x, p->lnf_w, a->mean, a->rstd, N, C, s);
    pl_region_end();
    a->ready = false;
}

void gpt_head_cost(const gpt_config *c, bool backward, double *flops, double *bytes) {
    require(c, NEED_VOCAB, "gpt_head_cost");
    dims d = dims_of(c);
    int N = d.N, C = d.C, V = d.V;
    tally t = {0, 0};
    if (!backward) {
        add_copy(&t, 4.0 * d.NC);
        add_copy(&t, 4.0 * N);
        ADD_KERNEL(&t, kern_layernorm_cost(N, C, 0, &b_, &f_));
        add_gemms(&t, 1, N, V, C);
        ADD_KERNEL(&t, kern_xent_cost(N, V, 0, &b_, &f_));
    } else {
        ADD_KERNEL(&t, kern_xent_cost(N, V, 1, &b_, &f_));
        t.bytes += 8.0 * N * V, t.flops += (double)N * V; /* pl_scale */
        add_gemms(&t, 1, V, C, N);
        add_gemms(&t, 1, N, C, V);
        ADD_KERNEL(&t, kern_layernorm_cost(N, C, 1, &b_, &f_));
    }
    *flops = t.flops;
    *bytes = t.bytes;
}

/* ==================================================================================== */
/* Optimizer                                                                              */
/* ==================================================================================== */

void gpt_sgd_step(float *params, float *grads, size_t count, float lr, pl_stream *s) {
    pl_scale(grads, -lr, count, s);
    pl_reduce_local(params, grads, count, PL_SUM, s);
}
