/* gpt.h - the GPT-2 model that the pipeline lab splits over ranks: transformer blocks, the
 * token + position embedding and the loss head, on the device, at tensor-parallel size 1.
 *
 * The lab's schedules and executor call these pieces; they never write the block. Every
 * piece runs on either device (plain C over the kernels/ dispatchers and pl_gemm).
 *
 * Shapes: T positions per sequence, b sequences per micro-batch, N = T*b rows, C hidden,
 * H heads of hs = C/H, F MLP width, V vocabulary, P rows of the position table.
 * Activations are sequence-major [T, b, C]: row t*b + j is position t of sequence j.
 * Weights are [out x in] row-major (PyTorch nn.Linear, GGUF): y = x W^T + b.
 * The fused QKV weight [3C, C] keeps each head's q | k | v together, the layout
 * kern_attention expects: head h owns output rows [3*hs*h, 3*hs*(h+1)).
 *
 * The block (pre-LN GPT-2):
 *     x1 = x  + proj(attention(qkv(ln1(x))))
 *     y  = x1 + fc2(gelu(fc1(ln2(x1))))
 *
 * Backward comes in two halves, as zero-bubble schedules need them:
 *     B  gpt_block_backward_input   dx only: every input-gradient GEMM, no weight gradient
 *     W  gpt_block_backward_weight  every parameter gradient, accumulated (+=) into g
 * and gpt_block_backward does both at once. What a block keeps for one micro-batch lives
 * in an activation record (gpt_acts); the memory it takes is documented below and in
 * docs/models.md, and is exactly what pl_mem_in_use() sees.
 */
#ifndef GPT_H
#define GPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_device.h" // defines: pl_stream
#include "pl_rng.h"    // defines: pl_rng_dist

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_LN_EPS 1e-5f /* layer-norm epsilon, GPT-2's */

typedef struct {
    int seq;     /* T: positions per sequence                                          */
    int batch;   /* b: sequences per micro-batch                                       */
    int hidden;  /* C                                                                  */
    int heads;   /* H, dividing C                                                      */
    int ffn;     /* F: MLP width (4C in GPT-2)                                         */
    int vocab;   /* V: 0 when only blocks are used (embedding and head need V >= 1)    */
    int max_pos; /* P: rows of the position table, >= T (embedding only; 0 otherwise)  */
} gpt_config;

/* True when c describes a model these functions can run; otherwise false with one line in
 * why (e.g. "hidden 30 is not a multiple of heads 4"). The allocation functions below call
 * it and stop the job with that line on a bad config. */
bool gpt_config_valid(const gpt_config *c, char *why, size_t why_len);
/* True when every id in host[0 .. n) is in [0, vocab); otherwise false with the first bad
 * one named in why. Check token and target ids with it before uploading them: the device
 * functions read whatever row an id points at. */
bool gpt_ids_valid(const int *host, size_t n, int vocab, char *why, size_t why_len);

/* ==================================================================================== */
/* Parameters                                                                             */
/* ==================================================================================== */

/* The three kinds of parameter blocks, and their tensors in storage order. */
typedef enum { GPT_PART_BLOCK = 0, GPT_PART_EMBED, GPT_PART_HEAD } gpt_part;
typedef enum {
    GPT_LN1_W, GPT_LN1_B, GPT_QKV_W, GPT_QKV_B, GPT_PROJ_W, GPT_PROJ_B,
    GPT_LN2_W, GPT_LN2_B, GPT_FC1_W, GPT_FC1_B, GPT_FC2_W, GPT_FC2_B, GPT_BLOCK_NTENSORS
} gpt_block_tensor;
typedef enum { GPT_WTE, GPT_WPE, GPT_EMBED_NTENSORS } gpt_embed_tensor;
typedef enum { GPT_LNF_W, GPT_LNF_B, GPT_LM_W, GPT_HEAD_NTENSORS } gpt_head_tensor;

/* Everything about one tensor: its shape, where it sits in its part's allocation, and how
 * the counter RNG makes it. Tensor ids are 2^32 * (1 + part) + 16 * layer + tensor, so any
 * rank builds exactly layer l of the serial model, and the host reference the same bits. */
typedef struct {
    const char *name;   /* "qkv.w", "wte", ...                                          */
    int64_t rows, cols; /* weights [out, in]; vectors 1 x n; wte [V, C]; wpe [P, C]     */
    size_t offset;      /* floats from the start of the part's allocation               */
    uint64_t rng_id;    /* the tensor id for pl_rng_fill                                 */
    pl_rng_dist dist;   /* with lo, hi as pl_rng_fill takes them: layer-norm weights     */
    float lo, hi;       /* U(0.8, 1.2), biases U(-0.1, 0.1); linear weights and biases   */
                        /* U(+-1/sqrt(fan-in)); wte N(0, 0.02); wpe N(0, 0.01)           */
} gpt_tensor_info;

int gpt_part_ntensors(gpt_part part);
size_t gpt_part_count(const gpt_config *c, gpt_part part); /* floats of all its tensors */
/* which: a gpt_block_tensor, gpt_embed_tensor or gpt_head_tensor; layer: blocks only. */
gpt_tensor_info gpt_tensor(const gpt_config *c, gpt_part part, int which, int layer);

/* Parameters of one part, or their gradients (the same struct): named tensors that are
 * also t[i] in storage order, inside one allocation of `count` floats at `base`. Device
 * memory from the *_params_alloc below; host memory from gpt_host.h's allocators. */
typedef struct {
    union {
        struct {
            float *ln1_w, *ln1_b; /* [C], [C]       */
            float *qkv_w, *qkv_b; /* [3C, C], [3C]  */
            float *proj_w, *proj_b; /* [C, C], [C]  */
            float *ln2_w, *ln2_b; /* [C], [C]       */
            float *fc1_w, *fc1_b; /* [F, C], [F]    */
            float *fc2_w, *fc2_b; /* [C, F], [C]    */
        };
        float *t[GPT_BLOCK_NTENSORS];
    };
    float *base;
    size_t count;
} gpt_block_params;

typedef struct {
    union {
        struct {
            float *wte; /* [V, C] token embeddings    */
            float *wpe; /* [P, C] position embeddings */
        };
        float *t[GPT_EMBED_NTENSORS];
    };
    float *base;
    size_t count;
} gpt_embed_params;

typedef struct {
    union {
        struct {
            float *lnf_w, *lnf_b; /* [C], [C] final layer norm        */
            float *lm_w;          /* [V, C] LM head (untied, no bias) */
        };
        float *t[GPT_HEAD_NTENSORS];
    };
    float *base;
    size_t count;
} gpt_head_params;

/* Device allocation (contents uninitialised; pl_fill(g.base, 0, g.count, s) zeroes a
 * gradient) and the counter-RNG initialisation of the serial model's tensors. */
void gpt_block_params_alloc(gpt_block_params *p, const gpt_config *c);
void gpt_embed_params_alloc(gpt_embed_params *p, const gpt_config *c);
void gpt_head_params_alloc(gpt_head_params *p, const gpt_config *c);
void gpt_block_params_free(gpt_block_params *p);
void gpt_embed_params_free(gpt_embed_params *p);
void gpt_head_params_free(gpt_head_params *p);
void gpt_block_init(gpt_block_params *p, const gpt_config *c, int layer, uint64_t seed);
void gpt_embed_init(gpt_embed_params *p, const gpt_config *c, uint64_t seed);
void gpt_head_init(gpt_head_params *p, const gpt_config *c, uint64_t seed);

/* ==================================================================================== */
/* Activation records and the workspace                                                   */
/* ==================================================================================== */

/* What one block keeps for one micro-batch, in one pl_malloc (plus a small host struct).
 * Bytes, with N = T*b and fp32:
 *   recompute = false: every activation the backward reads
 *       x, ln1, att, x1, ln2 [N, C]; qkv [N, 3C]; fc1, gel [N, F]; probs [b, H, T, T];
 *       mean and rstd of both layer norms [N]
 *       = 4 * (N * (8C + 2F + 4) + b*H*T*T)
 *   recompute = true: only the block's input x [N, C] = 4 * N * C; the backward first
 *       rebuilds the rest from x in the workspace (gpt_recompute_count counts it).
 * The split backward also keeps, from B until W, the gradient flowing into every linear
 * layer and layer norm (dy, dh2, dx1, dh1 [N, C]; dqkv [N, 3C]; dfc1 [N, F]):
 *       gpt_acts_wstash_bytes = 4 * N * (7C + F),
 * allocated by the first B on a record and kept until gpt_acts_free. A record only ever
 * used with the fused gpt_block_backward never allocates it. */
typedef struct gpt_acts gpt_acts;
size_t gpt_acts_bytes(const gpt_config *c, bool recompute);
size_t gpt_acts_wstash_bytes(const gpt_config *c);
gpt_acts *gpt_acts_alloc(const gpt_config *c, bool recompute);
void gpt_acts_free(gpt_acts *a);
/* Forget a forward that will not be followed by its backward (an evaluation pass), so
 * the record can take the next forward. */
void gpt_acts_reset(gpt_acts *a);

/* Temporaries of one call, allocated once per rank (and stream) and shared by every block
 * and micro-batch: they are not stash. Parts:
 *   always             the backward's gradients and attention scratch
 *                      4 * (N * (7C + F) + b*H*T*T + 2C)
 *   GPT_WS_RECOMPUTE   the rebuilt activations of records made with recompute = true
 *                      4 * (N * (7C + 2F + 4) + b*H*T*T)
 *   GPT_WS_HEAD        the head's logits and input gradient: 4 * N * (V + C) */
enum { GPT_WS_RECOMPUTE = 1, GPT_WS_HEAD = 2 };
typedef struct gpt_workspace gpt_workspace;
size_t gpt_workspace_bytes(const gpt_config *c, unsigned parts);
gpt_workspace *gpt_workspace_alloc(const gpt_config *c, unsigned parts);
void gpt_workspace_free(gpt_workspace *ws);

/* ==================================================================================== */
/* The block                                                                              */
/* ==================================================================================== */

/* y = block(x), x and y [N, C] (y may alias x: x is copied into the record first). The
 * record must not be waiting for a W. */
void gpt_block_forward(const gpt_block_params *p, gpt_acts *a, float *y, const float *x,
                       gpt_workspace *ws, pl_stream *s);
/* B: dx [N, C] (written) from dy [N, C], after the record's forward. No weight gradient;
 * keeps what W needs in the record. dx must not alias dy. */
void gpt_block_backward_input(const gpt_block_params *p, gpt_acts *a, float *dx,
                              const float *dy, gpt_workspace *ws, pl_stream *s);
/* W: every parameter gradient of the record's micro-batch, accumulated (+=) into g, after
 * its B. No input-gradient GEMM. The record is then free for the next forward. */
void gpt_block_backward_weight(const gpt_block_params *p, gpt_block_params *g, gpt_acts *a,
                               gpt_workspace *ws, pl_stream *s);
/* B then W in one call, with B's gradients in the workspace instead of the record (and,
 * with recomputation, one rebuild instead of two). Bit for bit the same results. */
void gpt_block_backward(const gpt_block_params *p, gpt_block_params *g, gpt_acts *a, float *dx,
                        const float *dy, gpt_workspace *ws, pl_stream *s);

/* Forward rebuilds done by the backward of records made with recompute = true, since the
 * start of the program: one per fused backward, one per B and one per W (W needs the
 * activations again: the rebuild that B made lives in the shared workspace). */
uint64_t gpt_recompute_count(void);

/* What each phase records in the trace: the GEMMs (2mnk flops, 4(mk + kn + mn) bytes) and
 * kernels (kern_*_cost, copies) it issues, summed. F forward; R the rebuild of a
 * recompute record (F without the output projection and its residual, which nothing
 * reads); B and W as above; BW the fused backward (B + W without B's copy of dy). With
 * recomputation B, W and BW each cost R more. */
typedef enum { GPT_PHASE_F, GPT_PHASE_R, GPT_PHASE_B, GPT_PHASE_W, GPT_PHASE_BW } gpt_phase;
void gpt_block_cost(const gpt_config *c, gpt_phase phase, double *flops, double *bytes);

/* ==================================================================================== */
/* Embedding and loss head                                                                */
/* ==================================================================================== */

/* x[t, j, :] = wte[tokens[t, j]] + wpe[t] (positions from 0). tokens: device [T, b] ints
 * in [0, V) (gpt_ids_valid). */
void gpt_embed_forward(const gpt_config *c, const gpt_embed_params *p, float *x,
                       const int *tokens, pl_stream *s);
/* dwte, dwpe accumulated (+=) into g from dx [N, C]. */
void gpt_embed_backward(const gpt_config *c, gpt_embed_params *g, const float *dx,
                        const int *tokens, pl_stream *s);
void gpt_embed_cost(const gpt_config *c, bool backward, double *flops, double *bytes);

/* The head's record: its input, the final layer norm's output and statistics, the softmax
 * probabilities, per-token losses and the targets: 4 * N * (2C + V + 4) bytes. */
typedef struct gpt_head_acts gpt_head_acts;
size_t gpt_head_acts_bytes(const gpt_config *c);
gpt_head_acts *gpt_head_acts_alloc(const gpt_config *c);
void gpt_head_acts_free(gpt_head_acts *a);

/* Final layer norm, LM head, softmax cross-entropy over the N tokens of x [N, C] with
 * targets (device [T, b] ints in [0, V)). Returns the mean loss over the N tokens; it waits
 * for stream s to read the losses back. ws needs GPT_WS_HEAD. */
double gpt_head_forward(const gpt_head_params *p, gpt_head_acts *a, const float *x,
                        const int *targets, gpt_workspace *ws, pl_stream *s);
/* dx [N, C] (written) = d(loss_scale * mean loss)/dx, and the head's parameter gradients
 * of the same quantity accumulated (+=) into g. A pipeline passes loss_scale = 1/m over m
 * micro-batches, so the accumulated gradient is that of the global batch's mean loss. */
void gpt_head_backward(const gpt_head_params *p, gpt_head_params *g, gpt_head_acts *a,
                       float *dx, float loss_scale, gpt_workspace *ws, pl_stream *s);
void gpt_head_cost(const gpt_config *c, bool backward, double *flops, double *bytes);

/* Plain SGD on one parameter block: p -= lr * g over count floats (pass p.base, g.base,
 * p.count). g is consumed: it is left scaled by -lr, so zero it before accumulating the
 * next step's gradient. */
void gpt_sgd_step(float *params, float *grads, size_t count, float lr, pl_stream *s);

#ifdef __cplusplus
}
#endif

#endif
