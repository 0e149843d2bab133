/* pipeline.h - Lab 4: pipeline parallelism (the API the grader calls; do not edit: you
 * implement the functions declared at the bottom, in pipeline.c).
 *
 * The model is the GPT-2 of models/gpt.h: an embedding, L transformer blocks and a loss
 * head. With p pipeline stages (one per rank) and v model chunks per stage, the L blocks
 * are cut into V = v*p virtual stages; virtual stage j = k*p + s is chunk k of stage s
 * (with v = 1, chunk 0 of stage s is virtual stage s). The embedding runs at the start of
 * virtual stage 0, the loss head at the end of virtual stage V-1.
 *
 * A global batch of m*b sequences is cut into m micro-batches of b sequences each. One
 * training step is, on every stage, an ordered list of actions:
 *     F(mb, k)  forward of micro-batch mb through chunk k
 *     B(mb, k)  backward of it: the input gradient, and the weight gradients too unless
 *               the schedule has W actions (zero bubble), then B is the input gradient only
 *     W(mb, k)  the weight gradients of micro-batch mb in chunk k (zero bubble only)
 * The four schedule generators below write that list for one stage; pp_execute runs one
 * step of a whole plan (every stage's list) with real activations.
 *
 * Shapes (models/gpt.h): T positions, b sequences per micro-batch, N = T*b rows, C hidden.
 * An activation or a gradient travelling between stages is one [N, C] float tensor
 * (sequence-major, row t*b + j), N*C*4 bytes. Tokens and targets are [T, b] ints.
 */
#ifndef LAB04_PIPELINE_H
#define LAB04_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>

#include "gpt.h" // defines: gpt_config, gpt_block_params, gpt_acts, gpt_workspace, gpt_*
#include "pl.h"  // defines: pl_comm, pl_send/pl_recv, pl_group_start/end, pl_malloc

#define PP_MAX_STAGES 64 /* p */
#define PP_MAX_CHUNKS 8  /* v */

/* Return codes: PP_OK, or one of these (negative, so a count can share the return). */
enum {
    PP_OK = 0,
    PP_ERR_STAGES = -1,   /* p < 1, p > layers, or a stage s outside [0, p)                */
    PP_ERR_MICRO = -2,    /* m < 1                                                          */
    PP_ERR_DIVIDE = -3,   /* interleaved: m is not a multiple of p (Megatron's requirement) */
    PP_ERR_CHUNKS = -4,   /* v < 1, v > PP_MAX_CHUNKS, v*p > layers, v > 1 without
                             the interleaved schedule                                       */
    PP_ERR_CAPACITY = -5, /* the output array cannot hold the list                          */
    PP_ERR_PLAN = -6,     /* pp_execute: the plan is not a schedule it can run (an action
                             out of range or twice, one missing, or one that can never run) */
    PP_ERR_TODO = -99     /* not written yet                                                */
};

static inline const char *pp_error_string(int rc) {
    switch (rc) {
    case PP_OK: return "ok";
    case PP_ERR_STAGES: return "bad number of stages (p < 1, p > layers) or stage out of range";
    case PP_ERR_MICRO: return "fewer than one micro-batch";
    case PP_ERR_DIVIDE: return "interleaved: micro-batches not a multiple of the stages";
    case PP_ERR_CHUNKS: return "bad number of chunks (v < 1, v * p > layers, or v > 1 without interleaving)";
    case PP_ERR_CAPACITY: return "output array too small";
    case PP_ERR_PLAN: return "the plan is not a runnable schedule";
    case PP_ERR_TODO: return "not implemented yet";
    default: return rc > 0 ? "a count, not an error" : "unknown error";
    }
}

typedef enum { PP_GPIPE = 0, PP_1F1B, PP_INTERLEAVED, PP_ZB_H1, PP_NSCHEDULES } pp_schedule_kind;
typedef enum { PP_F = 0, PP_B, PP_W } pp_kind;

typedef struct {
    pp_kind kind;
    int mb;    /* micro-batch, [0, m)                       */
    int chunk; /* model chunk on this stage, [0, v); 0 when v = 1 */
} pp_action;

/* Actions in stage s's list: every (mb, chunk) once as F and once as B, and once as W in
 * ZB-H1: 2m (GPipe, 1F1B), 2mv (interleaved), 3m (ZB-H1). */
static inline int pp_schedule_length(pp_schedule_kind k, int m, int v) {
    return k == PP_ZB_H1 ? 3 * m : k == PP_INTERLEAVED ? 2 * m * v : 2 * m;
}

typedef struct {
    int stages;                /* p                                                   */
    int micro;                 /* m                                                   */
    int chunks;                /* v: 1, or more with PP_INTERLEAVED                   */
    int layers;                /* L blocks in the model                               */
    pp_schedule_kind schedule;
    bool recompute;            /* full activation recomputation (see pp_execute)      */
} pp_config;

/* The partition (picotron's rule over the V = v*p virtual stages): L / V blocks each, one
 * more for the first L % V virtual stages. Virtual stage j = chunk*p + stage holds blocks
 * [*first, *first + count); returns count (>= 1 when V <= L). */
static inline int pp_layers(const pp_config *c, int stage, int chunk, int *first) {
    int V = c->chunks * c->stages, j = chunk * c->stages + stage;
    int base = c->layers / V, extra = c->layers % V;
    *first = j * base + (j < extra ? j : extra);
    return base + (j < extra ? 1 : 0);
}

/* ==================================================================================== */
/* What pp_execute works on (built by the kit, grader/player/lab04_run.c)                */
/* ==================================================================================== */

typedef struct {
    int first, count;          /* blocks [first, first + count) of the serial model   */
    gpt_block_params *params;  /* [count] device parameters, the serial model's bits  */
    gpt_block_params *grads;   /* [count] device gradients, same shapes               */
} pp_chunk;

/* One stage: everything a rank holds. */
typedef struct {
    pp_config cfg;
    gpt_config model;          /* T, b (one micro-batch), C, H, F, V, P               */
    pl_comm *comm;             /* the pipeline group; stage s is rank s in it         */
    int stage;                 /* s                                                   */
    pp_chunk chunk[PP_MAX_CHUNKS]; /* chunk k = virtual stage k*p + s                 */
    bool has_embed;            /* virtual stage 0 lives here (stage 0, chunk 0)       */
    bool has_head;             /* virtual stage V-1 lives here (stage p-1, chunk v-1) */
    gpt_embed_params embed, dembed; /* when has_embed                                 */
    gpt_head_params head, dhead;    /* when has_head                                  */
    gpt_workspace *ws;         /* the shared scratch of every gpt_* call: it has the
                                  GPT_WS_RECOMPUTE part when cfg.recompute, and
                                  GPT_WS_HEAD when has_head                           */
    float lr;                  /* the SGD learning rate                               */
} pp_stage;

/* Every stage's action list: what each rank runs (acts[s][0 .. count[s])). */
typedef struct {
    int stages;
    const pp_action *acts[PP_MAX_STAGES];
    int count[PP_MAX_STAGES];
} pp_plan;

typedef struct {
    const int *tokens;  /* device [m][T, b]: micro-batch mb at tokens + mb*T*b; only
                           where has_embed (NULL elsewhere)                            */
    const int *targets; /* device [m][T, b], the same layout; only where has_head       */
} pp_batch;

/* ==================================================================================== */
/* What you implement (pipeline.c)                                                       */
/* ==================================================================================== */

/* PP_OK, or the first problem of c: PP_ERR_STAGES (p < 1, p > layers), PP_ERR_MICRO
 * (m < 1), PP_ERR_CHUNKS (v < 1, v > PP_MAX_CHUNKS, v > 1 with a schedule other than
 * interleaved, v*p > layers), PP_ERR_DIVIDE (interleaved with m % p != 0). */
int pp_config_check(const pp_config *c);

/* Stage s's action list for p stages and m micro-batches, written to out[0 .. cap).
 * Returns the number of actions, or PP_ERR_STAGES (p < 1 or s outside [0, p)),
 * PP_ERR_MICRO (m < 1), PP_ERR_CHUNKS, PP_ERR_DIVIDE, PP_ERR_CAPACITY (cap too small).
 * Chunks are 0 except in the interleaved schedule.
 *
 * GPipe: F(0) .. F(m-1), then B(0) .. B(m-1) (first in, first out).
 * 1F1B (Megatron's non-interleaved schedule): w = min(p-s-1, m) warm-up forwards F(0) ..
 *     F(w-1); then for i = 0 .. m-w-1: F(w+i), B(i); then the cool-down B(m-w) .. B(m-1).
 * Interleaved 1F1B, v chunks (Megatron): the k-th forward of the stage is micro-batch
 *     (k / (p v)) p + k % p of chunk (k % (p v)) / p (micro-batches in groups of p, each
 *     group through chunk 0, then chunk 1, ...); the k-th backward is the same micro-batch
 *     of chunk v-1 minus that. w = min(2(p-s-1) + (v-1)p, m v) warm-up forwards, then
 *     forward w+i, backward i for i = 0 .. m v - w - 1, then the remaining backwards.
 *     m must be a multiple of p (PP_ERR_DIVIDE); 1 <= v <= PP_MAX_CHUNKS.
 * ZB-H1 (zero bubble, Qi et al.): the 1F1B order of F and B (B = input gradient only),
 *     and each B(i) followed by W(i - s) when i >= s: stage s defers its weight gradients
 *     by s backward passes; the s (or fewer) W's still missing after the last B come at
 *     the end, in order. */
int pp_schedule_gpipe(int p, int s, int m, pp_action *out, int cap);
int pp_schedule_1f1b(int p, int s, int m, pp_action *out, int cap);
int pp_schedule_interleaved(int p, int s, int m, int v, pp_action *out, int cap);
int pp_schedule_zbh1(int p, int s, int m, pp_action *out, int cap);

/* One training step of stage st->stage: run plan->acts[st->stage] in order, on the
 * micro-batches of batch, then the optimizer step. Returns PP_OK (every rank the same) or
 * PP_ERR_PLAN before any communication. What it must do:
 *   - zero every gradient the stage holds (block chunks, dembed, dhead) first;
 *   - F(mb, k): the input is the embedding of the tokens (virtual stage 0) or the [N, C]
 *     activation received from the previous virtual stage; run the chunk's blocks
 *     (gpt_block_forward) into a new activation record per block, stashed first in, first
 *     out; then send the output to the next virtual stage, or (virtual stage V-1) run the
 *     head on the micro-batch's targets (gpt_head_forward, one head record per micro-batch)
 *   - B(mb, k): the output gradient is received from the next virtual stage, or made by
 *     the head (gpt_head_backward with loss_scale 1/m, so the accumulated gradient is the
 *     global batch's mean loss's); run the blocks backward (last block first) on the
 *     oldest stashed records of the chunk, send dx to the previous virtual stage, or
 *     (virtual stage 0) accumulate the embedding's gradient (gpt_embed_backward). Without
 *     W actions B is gpt_block_backward (gradients accumulate, +=); with them it is
 *     gpt_block_backward_input and W(mb, k) is gpt_block_backward_weight. A record is
 *     free again after its backward (or its W).
 *   - the sends and receives (pl_send/pl_recv on st->comm, N*C floats each; peers are
 *     ranks, (s +- 1) mod p) paired so that no run can deadlock under rendezvous
 *     semantics, and the message from a stage to itself (p = 1 with v > 1) kept locally;
 *   - cfg.recompute: every activation record made with recompute = true (it keeps only
 *     the block's input; the backward rebuilds the rest in st->ws);
 *   - after the last action: gpt_sgd_step on every parameter block the stage holds
 *     (blocks, embed, head): p -= lr * g; it leaves -lr * g in the gradient, which the
 *     grader reads;
 *   - *loss = the mean of the micro-batches' losses on the rank of virtual stage V-1,
 *     0 elsewhere.
 * Every record and buffer allocated here is freed before it returns: the grader measures
 * the stash as the peak of pl_mem_in_use() during the call. */
int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss);

#endif
