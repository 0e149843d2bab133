/* zero.h - Lab 7: sharded data parallelism, ZeRO-1, ZeRO-2 and ZeRO-3 / FSDP (the API the
 * grader calls; do not edit: you implement the functions declared at the bottom, in zero.c).
 *
 * The model is the GPT-2 of models/gpt.h, cut into units (FSDP's units, ZeRO-3's gathers):
 *     unit 0          the embedding: wte [V, C], wpe [P, C]
 *     unit 1 .. L     transformer block l = unit - 1: its 12 tensors in gpt.h's order
 *     unit L + 1      the head: lnf.w [C], lnf.b [C], lm.w [V, C]
 * U = L + 2 units, run forward 0 .. U-1 and backward U-1 .. 0. A unit's *full buffer* is its
 * tensors one after the other in that order (storage order, zero_tensor.offset), numel
 * elements: what the kit computes with. Every rank runs the same model on its own slice of
 * each global batch; the kit does the compute and calls your hooks around every unit.
 *
 * Shapes: a tensor is [dim0, row] row-major (a matrix [out, in], the embeddings [V, C] and
 * [P, C]; a vector of n elements is dim0 = n, row = 1). Its elements are numbered flat,
 * row-major, 0 .. numel-1: "elements [a, b) of tensor t" always means these numbers.
 * Element types: fp32 is float; bf16 is a uint16_t word (the top half of a float,
 * pl_bf16.h), converted with kernels/kern_bf16.h. Ψ below is the model's numel.
 *
 * Allowed harness calls: memory (pl_malloc_tagged with the category of each buffer, pl_free,
 * pl_copy, pl_memset, pl_fill, pl_scale, pl_upload/pl_download), streams and events, the
 * collectives pl_allgather(_bf16), pl_reduce_scatter(_bf16), pl_allreduce (the norm only),
 * and the kernels kern_bf16_* and kern_clip_*. Nothing else talks to the other ranks.
 */
#ifndef LAB07_ZERO_H
#define LAB07_ZERO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_bf16.h" // defines: kern_bf16_from_f32, kern_bf16_to_f32
#include "kern_clip.h" // defines: kern_clip_sumsq(_bf16), kern_clip_coef, kern_clip_adamw(_bf16)
#include "pl.h"        // defines: pl_comm, collectives, pl_malloc_tagged, streams and events

#define ZERO_MAX_UNITS 32    /* U: at most 30 blocks                                    */
#define ZERO_MAX_TENSORS 384 /* 2 + 12 L + 3                                            */
#define ZERO_MAX_BUCKETS 32

/* Return codes: ZERO_OK or a count (>= 0), or one of these. */
enum {
    ZERO_OK = 0,
    ZERO_ERR_ARG = -1,      /* world < 1, rank outside [0, world), cap 0, no units      */
    ZERO_ERR_CAPACITY = -2, /* the output array cannot hold the answer                   */
    ZERO_ERR_COVERAGE = -3, /* zero_ckpt_plan: an element of a new piece is in no saved one */
    ZERO_ERR_TODO = -99     /* not written yet                                          */
};

static inline const char *zero_error_string(int rc) {
    switch (rc) {
    case ZERO_OK: return "ok";
    case ZERO_ERR_ARG: return "bad argument";
    case ZERO_ERR_CAPACITY: return "output array too small";
    case ZERO_ERR_COVERAGE: return "the saved pieces do not cover every element";
    case ZERO_ERR_TODO: return "not implemented yet";
    default: return rc > 0 ? "a count, not an error" : "unknown error";
    }
}

/* ==================================================================================== */
/* The model (filled by the kit)                                                         */
/* ==================================================================================== */

typedef struct {
    char name[24];      /* "wte", "h0.qkv.w", "lnf.b"                                   */
    int unit;           /* the unit it belongs to                                        */
    size_t dim0, row;   /* shape [dim0, row]; a vector of n is [n, 1]                    */
    size_t numel;       /* dim0 * row                                                    */
    size_t offset;      /* where it starts in its unit's full buffer (elements)          */
} zero_tensor;

typedef struct {
    int first, count;   /* its tensors: tensor[first .. first + count)                    */
    size_t numel;       /* elements of its full buffer: the sum of its tensors'          */
} zero_unit;

typedef struct {
    int nunits;                        /* U = L + 2                                      */
    int ntensors;
    zero_unit unit[ZERO_MAX_UNITS];    /* forward order                                  */
    zero_tensor tensor[ZERO_MAX_TENSORS]; /* unit by unit, storage order                 */
    size_t numel;                      /* Ψ                                              */
} zero_model;

/* ==================================================================================== */
/* Layouts                                                                               */
/* ==================================================================================== */

/* ZeRO-1 and ZeRO-2 (Megatron's distributed optimizer): the parameters, and the gradients,
 * live in flat buckets. Units are taken in backward order (U-1 first: the order gradients
 * are produced in), each whole, its elements in storage order; a bucket closes once it holds
 * at least `cap` elements (so a large unit may overshoot it), and the next unit opens a new
 * one. Each bucket is then padded with zeros to a multiple of the world size, so that it
 * splits into `world` equal shards: rank r owns elements [r * shard, (r + 1) * shard) of
 * every bucket. The buckets sit one after the other in one flat space (offset). */
typedef struct {
    int first_unit;     /* the bucket's first unit (the highest-numbered)                 */
    int nunits;         /* units first_unit, first_unit - 1, ..., first_unit - nunits + 1  */
    size_t numel;       /* their elements, without padding                                */
    size_t padded;      /* numel rounded up to a multiple of world                        */
    size_t shard;       /* padded / world                                                 */
    size_t offset;      /* elements before this bucket in the flat space of all buckets   */
} zero_bucket;

/* ZeRO-3 (FSDP2's fully_shard): every tensor is split on dim 0, torch.chunk style: every
 * rank stores chunk = ceil(dim0 / world) rows; rank r holds rows [first, first + held) with
 * first = min(r * chunk, dim0), held = min(chunk, dim0 - first), possibly 0, and the rest of
 * its chunk is zero padding. A rank's shard of a unit is the chunks of its tensors one after
 * the other (chunk * row elements each, padding included): S_u elements; an all-gather of
 * the unit gives [world][S_u], which still has to be copied out into the full buffer. */

/* ==================================================================================== */
/* Configuration and state                                                               */
/* ==================================================================================== */

typedef enum { ZERO_FP32 = 0, ZERO_BF16 = 1 } zero_dtype;

typedef struct {
    int stage;                  /* 1, 2 or 3                                              */
    bool reshard_after_forward; /* stage 3: free a unit's gathered parameters after its
                                   forward (true, ZeRO-3) or keep them until its backward
                                   (false: ZeRO-2's memory, one all-gather fewer)         */
    zero_dtype param_dtype;     /* parameters and gradients: FP32, or BF16 (mixed precision:
                                   the optimizer keeps fp32 master weights)               */
    zero_dtype reduce_dtype;    /* what the reduce-scatter carries (FSDP2's reduce_dtype):
                                   FP32 (bf16 gradients are widened first, the reduced
                                   shard rounded back), or BF16 with BF16 parameters      */
    size_t bucket_cap;          /* stages 1 and 2: elements per bucket, >= 1              */
    float lr, beta1, beta2, eps, weight_decay; /* AdamW (kern_clip.h)                     */
    float max_norm;             /* clip the gradient to this global norm                  */
} zero_config;

typedef struct {
    zero_config cfg;
    const zero_model *model;
    pl_comm *comm;              /* the data-parallel group                                */
    int rank, world;
    int step;                   /* optimizer steps taken: AdamW's t of the next step is
                                   step + 1. The kit reads it to save a checkpoint and
                                   sets it when it loads one.                             */
    int nbuckets;               /* stages 1 and 2: the buckets (zero_buckets)             */
    zero_bucket bucket[ZERO_MAX_BUCKETS];
    void *extra;                /* yours: everything else you keep                        */
} zero_state;

/* What a rank owns of the optimizer's state: elements [begin, begin + count) of one
 * tensor, held in three device arrays of count fp32 values: the master weights (in fp32
 * runs, the parameters themselves), the first and the second moment. Padding is in no
 * piece. The kit saves and loads checkpoints through pieces, and reads the parameters a
 * rank owns from them. */
typedef struct {
    int tensor;                 /* index in model->tensor                                 */
    size_t begin, count;        /* flat elements of that tensor                           */
    float *master, *m, *v;      /* device [count] each                                    */
} zero_piece;

/* A piece of a saved checkpoint, as its metadata lists it: saved rank `rank` wrote
 * elements [begin, begin + count) of tensor `tensor` (master, m and v). */
typedef struct {
    int rank;
    int tensor;
    size_t begin, count;
} zero_saved_piece;

/* One read of a load: elements [src_offset, src_offset + count) of saved piece `saved`
 * go to elements [dst_offset, dst_offset + count) of this rank's piece `piece`. */
typedef struct {
    int piece;                  /* index into this rank's pieces (zero_pieces)            */
    size_t dst_offset;
    int saved;                  /* index into the saved pieces                            */
    size_t src_offset;
    size_t count;
} zero_read;

/* ==================================================================================== */
/* What you implement (zero.c)                                                           */
/* ==================================================================================== */

/* ---- layouts: pure functions (no communication, no allocation) ----------------------- */

/* The buckets of model m for `world` ranks (see zero_bucket), written to out[0 .. max).
 * Returns how many, or ZERO_ERR_ARG (world < 1, cap == 0, no units), ZERO_ERR_CAPACITY. */
int zero_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max);

/* ZeRO-3's split of a tensor of dim0 rows: returns chunk = ceil(dim0 / world) (0 when
 * dim0 is 0 or world < 1) and sets *first and *held for rank (see the rule above). */
size_t zero_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held);

/* ---- the hooks the kit calls, on every rank, around the model's compute -------------
 * One training step is, in this order:
 *     for u = 0 .. U-1:   p = zero_pre_forward(z, u);   forward of unit u;  zero_post_forward(z, u)
 *     for u = U-1 .. 0:   p = zero_pre_backward(z, u, &g); backward of unit u; zero_post_backward(z, u)
 *     zero_step(z)
 * The kit computes on the compute stream (NULL): a buffer you return must be ready for work
 * issued there after the hook returns (make the compute stream wait for your events), and
 * the gradient the kit writes into g is complete only on that stream. Each rank's gradient
 * is that of the mean loss over its own sequences; the step must use the average over the
 * ranks (the gradient of the global batch's mean loss). */

/* Set up z for model m: cfg, comm, layouts, and every buffer this stage keeps between
 * steps, tagged PL_MEM_PARAMS, PL_MEM_GRADS or PL_MEM_OPTIM (the grader compares each
 * category with the stage's formula, exactly, padding included: README.md). init[u] is unit
 * u's full buffer of initial fp32 parameters (device, valid during the call only): keep
 * what this rank holds of them; the moments start at 0 and z->step at 0. Gradients that the
 * kit never writes (padding) must be zero. */
void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm,
               float *const *init);

/* Unit u's full parameters (numel elements of param_dtype, storage order), valid for work
 * on the compute stream until zero_post_forward(z, u). ZeRO-3: all-gather them (unless a
 * prefetch already did), copy them out, and start the all-gather of unit u+1 (prefetch);
 * at most two units' gathered parameters (PL_MEM_GATHER) alive at once. */
const void *zero_pre_forward(zero_state *z, int u);
/* The kit has issued unit u's forward. ZeRO-3 with reshard_after_forward: free its
 * gathered parameters. */
void zero_post_forward(zero_state *z, int u);
/* Unit u's full parameters again (valid until zero_post_backward(z, u)), and in *grad a
 * device buffer of numel elements of param_dtype where the kit writes (=, not +=) unit u's
 * gradient. ZeRO-3: gather again if resharded, and prefetch unit u-1. ZeRO-2 and 3: the
 * gradient buffer is transient (PL_MEM_REDUCE): the full gradient never exists at once. */
const void *zero_pre_backward(zero_state *z, int u, void **grad);
/* The kit has issued unit u's backward. ZeRO-2: once every unit of a bucket is done,
 * reduce-scatter the bucket on the comm stream into this rank's gradient shard. ZeRO-3:
 * free the unit's gathered parameters, reduce-scatter its gradient on the comm stream
 * (copied in, padded, [world][S_u]), free the transient. */
void zero_post_backward(zero_state *z, int u);
/* After the backward of unit 0: ZeRO-1 reduce-scatters every bucket; then, every stage:
 * the global gradient norm (kern_clip_sumsq over this rank's gradient shard, one
 * pl_allreduce of one float, kern_clip_coef with cfg.max_norm), AdamW with the clipped
 * gradient on this rank's shard (step z->step + 1), then z->step++; ZeRO-1 and 2 all-gather
 * the updated parameters into every rank's full buffers. */
void zero_step(zero_state *z);
/* Free every buffer (and event) zero_init or the hooks allocated. */
void zero_free(zero_state *z);

/* ---- sharded checkpoints (the kit reads and writes the files) ------------------------ */

/* This rank's pieces (see zero_piece), written to out[0 .. max): every element it owns of
 * every tensor once, in any order. Returns how many, or ZERO_ERR_CAPACITY. */
int zero_pieces(const zero_state *z, zero_piece *out, int max);
/* The reads that fill this rank's pieces `mine` from a checkpoint whose metadata lists
 * `saved` (saved at any world size and stage): for every element of every piece of mine,
 * one read from a saved piece of the same tensor that holds it. Written to out[0 .. max);
 * returns how many, ZERO_ERR_CAPACITY, or ZERO_ERR_COVERAGE when some element of mine is
 * in no saved piece (the checkpoint does not match the model). Pure: no I/O at all. */
int zero_ckpt_plan(const zero_piece *mine, int nmine, const zero_saved_piece *saved, int nsaved,
                   zero_read *out, int max);
/* The kit has loaded master, m and v of every piece and set z->step: rebuild what derives
 * from them (the parameters this rank keeps, in every buffer they live in). */
void zero_ckpt_loaded(zero_state *z);

#endif
