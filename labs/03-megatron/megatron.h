/* megatron.h - Lab 3: the API of a Megatron tensor-parallel GPT-2 block (do not edit;
 * you implement the functions declared at the bottom, in megatron.c).
 *
 * Shapes: T sequence, B batch, C hidden, H heads of hs = C/H, F = ffn width, tp ranks in
 * cfg->tp. Activations are sequence-major [T, B, C] (Megatron's [s, b, h]): row t*B + b.
 * N = T*B rows. Without sequence parallelism every rank holds all N rows of the block's
 * input and output; with it (cfg->sp) rank r holds rows [r*N/tp, (r+1)*N/tp), i.e.
 * positions [r*T/tp, (r+1)*T/tp) of every sequence.
 *
 * Weights are stored [in, out] (y = x W + b). The master (serial) block's tensors come from
 * the counter RNG (mg_fill_master below), so each rank can generate exactly its shard.
 * The QKV master weight [C, 3C] keeps each head's q | k | v together: head h owns columns
 * [3*hs*h, 3*hs*(h+1)), so rank r's heads [r*H/tp, (r+1)*H/tp) are one column block.
 */
#ifndef MEGATRON_H
#define MEGATRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl.h"

enum { MG_OK = 0, MG_ERR_HEADS = 1, MG_ERR_SEQ = 2, MG_ERR_SHAPE = 3 };

typedef struct {
    int seq, batch, hidden, heads, ffn; /* T, B, C, H, F (global sizes)                  */
    bool sp;                            /* sequence parallelism on                         */
    pl_comm *tp;                        /* the tensor-parallel group (tp = its size)       */
} mg_config;

/* One block's parameters, or its gradients: this rank's shards, in one allocation whose
 * first 6*C floats are the tensors every rank holds whole (the replicated ones). */
typedef struct {
    float *ln1_w, *ln1_b;   /* [C], [C]                      replicated              */
    float *proj_b;          /* [C]                           replicated (row layer)  */
    float *ln2_w, *ln2_b;   /* [C], [C]                      replicated              */
    float *fc2_b;           /* [C]                           replicated (row layer)  */
    float *qkv_w;           /* [C, 3C/tp]  column shard: master columns of this rank's heads */
    float *qkv_b;           /* [3C/tp]     the same columns of the master bias               */
    float *proj_w;          /* [C/tp, C]   row shard: master rows [r*C/tp, (r+1)*C/tp)       */
    float *fc1_w;           /* [C, F/tp]   column shard: master columns [r*F/tp, (r+1)*F/tp) */
    float *fc1_b;           /* [F/tp]                                                        */
    float *fc2_w;           /* [F/tp, C]   row shard: master rows [r*F/tp, (r+1)*F/tp)       */
    float *base;            /* the allocation                                                */
    size_t count;           /* floats in it                                                  */
    size_t replicated;      /* the first `replicated` (= 6*C) floats are replicated tensors  */
} mg_params;

/* The master tensors of one block, for mg_fill_master. */
typedef enum {
    MG_LN1_W, MG_LN1_B, MG_QKV_W, MG_QKV_B, MG_PROJ_W, MG_PROJ_B,
    MG_LN2_W, MG_LN2_B, MG_FC1_W, MG_FC1_B, MG_FC2_W, MG_FC2_B, MG_NTENSORS
} mg_tensor;

/* Rows x cols of master tensor `which` (vectors are 1 x n). */
static inline void mg_master_shape(const mg_config *c, mg_tensor which, int64_t *rows,
                                   int64_t *cols) {
    int64_t C = c->hidden, F = c->ffn;
    int64_t r[MG_NTENSORS] = {1, 1, C, 1, C, 1, 1, 1, C, 1, F, 1};
    int64_t k[MG_NTENSORS] = {C, C, 3 * C, 3 * C, C, C, C, C, F, F, C, C};
    *rows = r[which];
    *cols = k[which];
}

/* Write the block (rows [row0, row0 + dst.rows), columns [col0, col0 + dst.cols)) of master
 * tensor `which` of layer `layer` into dst. Every rank gets the serial master's bits. */
static inline void mg_fill_master(pl_tensor dst, const mg_config *c, mg_tensor which, int layer,
                                  int64_t row0, int64_t col0, uint64_t seed) {
    int64_t rows, cols;
    mg_master_shape(c, which, &rows, &cols);
    uint64_t id = 1000u + (uint64_t)layer * 32u + (uint64_t)which;
    float wb = 1.0f / (float)(rows > 1 ? rows : c->hidden); /* uniform(-1/sqrt(in), ..)  */
    switch (which) {
    case MG_LN1_W: case MG_LN2_W: pl_rng_fill(dst, cols, row0, col0, seed, id, PL_RNG_UNIFORM, 0.8f, 1.2f); break;
    case MG_LN1_B: case MG_LN2_B: pl_rng_fill(dst, cols, row0, col0, seed, id, PL_RNG_UNIFORM, -0.1f, 0.1f); break;
    default: {
        float b = 1.0f;
        while (b * b > wb) b *= 0.5f; /* a power of two near 1/sqrt(in): keeps it exact */
        pl_rng_fill(dst, cols, row0, col0, seed, id, PL_RNG_UNIFORM, -2 * b, 2 * b);
    }
    }
}

/* Point the fields of p into one allocation of p->count floats (p->base), shard sizes
 * for this rank; the contents are not initialised. */
static inline void mg_params_alloc(mg_params *p, const mg_config *c) {
    int tp = pl_comm_size(c->tp);
    size_t C = (size_t)c->hidden, F = (size_t)c->ffn, Cl = C / (size_t)tp, Fl = F / (size_t)tp;
    size_t sizes[12] = {C, C, C, C, C, C, C * 3 * Cl, 3 * Cl, Cl * C, C * Fl, Fl, Fl * C};
    float **fields[12] = {&p->ln1_w, &p->ln1_b, &p->proj_b, &p->ln2_w, &p->ln2_b, &p->fc2_b,
                          &p->qkv_w, &p->qkv_b, &p->proj_w, &p->fc1_w, &p->fc1_b, &p->fc2_w};
    p->count = 0;
    for (int i = 0; i < 12; i++) p->count += sizes[i];
    p->base = pl_malloc_floats(p->count);
    p->replicated = 6 * C;
    size_t off = 0;
    for (int i = 0; i < 12; i++) {
        *fields[i] = p->base + off;
        off += sizes[i];
    }
}
static inline void mg_params_free(mg_params *p) {
    pl_free(p->base);
    p->base = NULL;
}

/* The activations a block keeps from its forward pass for its backward pass. You define
 * the struct in megatron.c. */
typedef struct mg_acts mg_acts;

/* ===================================================================================== */
/* What you implement (megatron.c)                                                       */
/* ===================================================================================== */

/* MG_OK, or the first problem of c in this order: MG_ERR_SHAPE (a size below 1),
 * MG_ERR_HEADS (heads % tp != 0), MG_ERR_SEQ (sp and seq % tp != 0), MG_ERR_SHAPE
 * (hidden % heads != 0, or ffn % tp != 0). No communication. */
int mg_config_check(const mg_config *c);

/* Fill p (allocated with mg_params_alloc) with this rank's shards of layer `layer`'s master
 * tensors, using mg_fill_master. */
void mg_params_init(mg_params *p, const mg_config *c, int layer, uint64_t seed);

/* Activation storage for one block (everything forward keeps for backward, plus any
 * work buffers you want to keep). Allocate with pl_malloc: the grader measures it. */
mg_acts *mg_acts_alloc(const mg_config *c);
void mg_acts_free(mg_acts *a);

/* y = block(x). x, y: [N_local, C] (N_local = N, or N/tp with sp). Exactly two all-reduces
 * without sp; two all-gathers and two reduce-scatters with sp; nothing else. */
void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y,
                      const float *x, pl_stream *s);

/* dx = d loss / dx from dy (both [N_local, C]); the gradients of every parameter shard are
 * ACCUMULATED into g (+=; the caller zeroes them). With sp the replicated tensors' grads
 * are partial sums over this rank's rows (mg_sync_sp_grads completes them). Exactly two
 * all-reduces without sp; four all-gathers (two re-gather the layer-norm outputs the
 * column layers' weight gradients need) and two reduce-scatters with sp. */
void mg_block_backward(const mg_config *c, const mg_params *p, mg_params *g, mg_acts *a,
                       float *dx, const float *dy, pl_stream *s);

/* With sp and tp > 1: one all-reduce (sum) of the first g->replicated floats of g.
 * Otherwise nothing. */
void mg_sync_sp_grads(const mg_config *c, mg_params *g, pl_stream *s);

/* A stack of L blocks: y = block_{L-1}(... block_0(x)). p, g, a: arrays of L. */
void mg_stack_forward(const mg_config *c, int L, const mg_params *p, mg_acts **a, float *y,
                      const float *x, pl_stream *s);
void mg_stack_backward(const mg_config *c, int L, const mg_params *p, mg_params *g,
                       mg_acts **a, float *dx, const float *dy, pl_stream *s);

/* One SGD step on every block: sync the sp grads, then p -= lr * g (g may be overwritten). */
void mg_sgd_step(const mg_config *c, int L, mg_params *p, mg_params *g, float lr, pl_stream *s);

#endif
