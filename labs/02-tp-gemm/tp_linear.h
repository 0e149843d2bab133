/* tp_linear.h - Lab 2: tensor-parallel linear layers (Megatron-style column and row
 * parallelism), forward and backward, and a tensor-parallel MLP.
 *
 * The master weight of a linear layer is W [out x in] (the PyTorch layout) and the layer
 * computes y = x W^T + b for x [tokens x in]. With n = pl_comm_size(comm) ranks:
 *   column-parallel: rank r owns rows [r*out/n, (r+1)*out/n) of W  -> w [out/n x in]
 *                    and the same slice of b                         -> b [out/n]
 *   row-parallel:    rank r owns columns [r*in/n, (r+1)*in/n) of W   -> w [out x in/n]
 *                    and the whole bias (added once, after the all-reduce) -> b [out]
 * Every rank builds its shard from the master's counter RNG (see tp_linear_init), so the
 * shards are bit-identical to slices of the serial master weight.
 *
 * You implement the functions declared below in tp_linear.c, using only:
 *   pl_gemm                                          (local GEMM, row-major)
 *   pl_allreduce, pl_allgather                       (library collectives, PL_SUM)
 *   pl_rng_fill, pl_tensor_* views, pl_copy, pl_fill, pl_reduce_local, pl_scale,
 *   pl_malloc_floats / pl_free, pl_comm_rank, pl_comm_size
 *   the helpers in this header (tp_copy_2d, tp_bias_add, tp_bias_grad)
 *   kern_gelu_forward / kern_gelu_backward (kernels/kern_gelu.h, tanh form)
 * Point-to-point calls are not needed; the grader counts every collective and GEMM.
 *
 * Conventions: tensors are pl_tensor views of device memory (row-major, any ld unless
 * said otherwise); every call takes a stream (NULL: the compute stream) and passes it on;
 * gradients are ACCUMULATED into dw and db (+=), as in a framework; every function returns
 * TP_OK or an error code and, on an error, does nothing (no collective, no allocation).
 */
#ifndef LAB02_TP_LINEAR_H
#define LAB02_TP_LINEAR_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kern_bias.h" // defines: kern_bias_forward, kern_bias_backward (contiguous rows)
#include "pl.h"        // defines: pl_tensor, pl_gemm, pl_allreduce, pl_allgather, pl_rng_fill, ...

/* Return codes of the lab API. */
enum {
    TP_OK = 0,
    TP_ERR_NOT_DIVISIBLE = 1, /* the split dimension is not a multiple of the world size  */
    TP_ERR_SHAPE = 2,         /* a tensor argument has the wrong rows/cols                */
    TP_ERR_NOT_IMPLEMENTED = 3,
};
const char *tp_error_name(int code); /* "not divisible", ...; in tp_linear.c */

typedef enum { TP_COLUMN = 0, TP_ROW = 1 } tp_kind;

/* Master-weight initialisation, shared with the grader's serial reference: element
 * (i, j) of W [out x in] is pl_rng uniform in [-bound, bound) with bound = 1/sqrt(in),
 * tensor id `id`; element j of b [out] is the same distribution with tensor id `id + 1`. */
static inline float tp_init_bound(int64_t in) {
    return in > 0 ? (float)(1.0 / sqrt((double)in)) : 1.0f;
}

typedef struct {
    tp_kind kind;
    int64_t in, out;             /* global dimensions of the master weight W [out x in]      */
    int64_t in_local, out_local; /* this rank's shard: column [out/n x in], row [out x in/n] */
    pl_tensor w;                 /* the shard, contiguous: column [out/n x in], row [out x in/n] */
    float *b;                    /* column: b[r*out/n ..) [out/n]; row: all of b [out]; NULL: no bias */
    pl_tensor dw;                /* gradient of w, same shape                                 */
    float *db;                   /* gradient of b, same length, NULL without bias             */
    pl_comm *comm;               /* the tensor-parallel group                                 */
} tp_linear;

/* Check that the split dimension divides (column: out, row: in) by the world size of
 * comm, then allocate the shard and its gradients (zeroed) and fill the shard (and bias)
 * from the master with pl_rng_fill(seed, id / id+1). Returns TP_ERR_NOT_DIVISIBLE (and
 * allocates nothing) when it does not divide. */
int tp_linear_init(tp_linear *l, tp_kind kind, int64_t in, int64_t out, bool bias, uint64_t seed,
                   uint64_t id, pl_comm *comm);
void tp_linear_free(tp_linear *l);

/* Column-parallel forward. x [T x in] (the same on every rank);
 * y [T x out] when gather_output (then all ranks hold all of it), else [T x out/n]
 * (this rank's columns r*out/n ..). */
int tp_column_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool gather_output,
                      pl_stream *s);
/* Column-parallel backward. x [T x in] as in forward; dy shaped like forward's y;
 * dx [T x in]: the full input gradient on every rank. dw += ..., db += ... */
int tp_column_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool gather_output,
                       pl_stream *s);

/* Row-parallel forward. x [T x in/n] when input_is_parallel (this rank's columns of the
 * full input), else [T x in] (take your columns locally); y [T x out], contiguous
 * (ld == out), the same on every rank. */
int tp_row_forward(const tp_linear *l, pl_tensor x, pl_tensor y, bool input_is_parallel,
                   pl_stream *s);
/* Row-parallel backward. x as in forward; dy [T x out] (the same on every rank);
 * dx shaped like x: [T x in/n] when input_is_parallel, else [T x in] (all of it). */
int tp_row_backward(tp_linear *l, pl_tensor x, pl_tensor dy, pl_tensor dx, bool input_is_parallel,
                    pl_stream *s);

/* Tensor-parallel MLP: y = fc2(gelu(fc1(x))), fc1 column-parallel [ffn x d] (id, id+1),
 * fc2 row-parallel [d x ffn] (id+2, id+3), both with bias. One all-reduce forward, one
 * backward. h and a keep fc1's output and gelu(h) for the backward, [max_tokens x ffn/n]. */
typedef struct {
    tp_linear fc1, fc2;
    pl_tensor h, a, da;   /* scratch, contiguous, max_tokens x ffn/n */
    int64_t d, ffn, max_tokens;
} tp_mlp;

int tp_mlp_init(tp_mlp *m, int64_t d, int64_t ffn, int64_t max_tokens, uint64_t seed, uint64_t id,
                pl_comm *comm);
void tp_mlp_free(tp_mlp *m);
/* x [T x d], y [T x d] contiguous, T <= max_tokens; all replicated. */
int tp_mlp_forward(tp_mlp *m, pl_tensor x, pl_tensor y, pl_stream *s);
/* x [T x d] as in forward (forward must have run on it), dy [T x d], dx [T x d];
 * T <= max_tokens here too (the scratch holds max_tokens rows): TP_ERR_SHAPE otherwise. */
int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s);

/* ---- helpers you may use (given) ----------------------------------------------------- */

/* dst = src, both [rows x cols] views (any leading dimensions): one copy per row, or one
 * copy in all when both are contiguous. */
static inline void tp_copy_2d(pl_tensor dst, pl_tensor src, pl_stream *s) {
    if (pl_tensor_contiguous(dst) && pl_tensor_contiguous(src)) {
        pl_copy(dst.data, src.data, (size_t)pl_tensor_numel(src) * sizeof(float), s);
        return;
    }
    for (int64_t i = 0; i < src.rows; i++)
        pl_copy(dst.data + i * dst.ld, src.data + i * src.ld, (size_t)src.cols * sizeof(float), s);
}

/* y[i, :] += b for every row i. y [rows x cols], b [cols]. */
static inline void tp_bias_add(pl_tensor y, const float *b, pl_stream *s) {
    if (pl_tensor_contiguous(y)) {
        kern_bias_forward(y.data, b, (int)y.rows, (int)y.cols, s);
        return;
    }
    for (int64_t i = 0; i < y.rows; i++) pl_reduce_local(y.data + i * y.ld, b, (size_t)y.cols, PL_SUM, s);
}

/* db += sum over rows of dy. dy [rows x cols], db [cols]. */
static inline void tp_bias_grad(float *db, pl_tensor dy, pl_stream *s) {
    if (pl_tensor_contiguous(dy)) {
        kern_bias_backward(db, dy.data, (int)dy.rows, (int)dy.cols, s);
        return;
    }
    for (int64_t i = 0; i < dy.rows; i++) pl_reduce_local(db, dy.data + i * dy.ld, (size_t)dy.cols, PL_SUM, s);
}

#endif
