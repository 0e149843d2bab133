/* threed.h - Lab 8: 3D parallelism (the API the grader calls; do not edit: you implement
 * the functions declared at the bottom, in threed.c).
 *
 * One GPT-2 (models/gpt.h, with the token embedding tied to the LM head) is trained on a
 * world of N = t * p * d ranks at once:
 *   tensor parallelism (t)    each block's heads and MLP columns split (models/gpt_tp.h);
 *                             the vocabulary split too: the embedding and the loss
 *   pipeline parallelism (p)  the L blocks cut into p stages of L/p (the first L % p
 *                             stages one more), micro-batches under 1F1B
 *   data parallelism (d)      d replicas of that pipeline, each on its own sequences; the
 *                             gradients reduce-scattered and the optimizer sharded (ZeRO-1)
 * Rank layout (Megatron's: tensor innermost, then data, then pipeline):
 *     rank = tp + t * (dp + d * pp)
 *
 * Shapes: T positions per sequence, b sequences per micro-batch, N = T*b rows, C hidden,
 * H heads, F MLP width, V vocabulary; Vt = V/t vocabulary rows per tensor rank; tensor
 * rank r holds the token embedding rows [r*Vt, (r+1)*Vt). Activations are [T, b, C]
 * sequence-major (row t*b + j is position t of sequence j); token ids are host ints [T, b].
 */
#ifndef LAB08_THREED_H
#define LAB08_THREED_H

#include <stdbool.h>
#include <stddef.h>

#include "gpt.h"    // defines: gpt_config, gpt_block_params
#include "gpt_tp.h" // defines: gpt_tp_* (the tensor-parallel block each stage runs)
#include "pl.h"     // defines: pl_comm, pl_comm_split, collectives, pl_send/pl_recv, pl_malloc

#define TD_MAX_STAGES 64

/* Return codes: TD_OK or one of these (negative). */
enum {
    TD_OK = 0,
    TD_ERR_WORLD = -1,  /* t < 1, p < 1, or t * p does not divide the world               */
    TD_ERR_VOCAB = -2,  /* t does not divide the vocabulary                               */
    TD_ERR_HEADS = -3,  /* t does not divide the heads or the MLP width                   */
    TD_ERR_LAYERS = -4, /* the pipeline is deeper than the layers (p > L)                 */
    TD_ERR_BATCH = -5,  /* fewer than one micro-batch, or a bad shape (hidden % heads, < 1) */
    TD_ERR_TODO = -99   /* not written yet                                                */
};

static inline const char *td_error_string(int rc) {
    switch (rc) {
    case TD_OK: return "ok";
    case TD_ERR_WORLD: return "t * p does not divide the world (or t, p < 1)";
    case TD_ERR_VOCAB: return "t does not divide the vocabulary";
    case TD_ERR_HEADS: return "t does not divide the heads or the MLP width";
    case TD_ERR_LAYERS: return "more pipeline stages than layers";
    case TD_ERR_BATCH: return "no micro-batch, or a shape below 1 (or hidden not a multiple of heads)";
    case TD_ERR_TODO: return "not implemented yet";
    default: return "unknown error";
    }
}

typedef struct {
    int seq, batch;            /* T, b (one micro-batch)                                  */
    int hidden, heads, ffn;    /* C, H, F                                                 */
    int vocab, layers;         /* V, L                                                    */
    int t, p;                  /* tensor and pipeline degrees; d = world / (t p)          */
    int micro;                 /* m: micro-batches per data replica per step              */
    float lr, beta1, beta2, eps, weight_decay; /* AdamW (kern_optim_adamw's arguments)     */
    float max_norm;            /* gradients are clipped to this global norm               */
} td_config;

/* ==================================================================================== */
/* The grid                                                                              */
/* ==================================================================================== */

typedef struct {
    int t, p, d;         /* the degrees: t * p * d = the world                            */
    int tp, pp, dp;      /* this rank's coordinates: rank = tp + t * (dp + d * pp)        */
    pl_comm *tensor;     /* the t ranks with this (pp, dp), rank tp in it                 */
    pl_comm *data;       /* the d ranks with this (pp, tp), rank dp in it                 */
    pl_comm *pipeline;   /* the p ranks with this (tp, dp), rank pp in it                 */
    pl_comm *embed;      /* on the first and the last stage: those two ranks of this
                            (tp, dp), the first stage's as rank 0 (one rank when p = 1);
                            NULL on the stages between                                    */
} td_grid;

/* ==================================================================================== */
/* What the kit gives you (grader/player/lab08.c)                                        */
/* ==================================================================================== */

typedef enum { TD_F = 0, TD_B = 1 } td_kind;
typedef struct {
    td_kind kind;
    int mb; /* micro-batch, [0, m) */
} td_action;

/* Stage s's 1F1B list for p stages and m micro-batches (Megatron's non-interleaved
 * schedule, Lab 4): w = min(p - s - 1, m) forwards, then F(w + i), B(i) for
 * i = 0 .. m - w - 1, then the remaining backwards. Writes 2m actions to out (cap >= 2m);
 * returns 2m, or -1 on bad arguments. */
int td_schedule_1f1b(int p, int s, int m, td_action *out, int cap);

/* What a part of the stage's parameter buffer is, for the gradient norm. */
typedef enum {
    TD_SHARDED = 0,    /* this tensor rank's own slice: count it                          */
    TD_REPLICATED = 1, /* the same values on every tensor rank (layer norms, positions,
                          the row-parallel layers' biases): count it once per tensor group */
    TD_TIED_COPY = 2   /* the last stage's copy of the tied embedding (p > 1): the first
                          stage counts the embedding                                      */
} td_seg_kind;
typedef struct {
    size_t offset, count; /* floats of params / grads                                     */
    td_seg_kind kind;
} td_segment;

/* One rank's part of the model, built by the kit from the serial model's parameters (its
 * tensor shard of its stage's layers). Every parameter lives in one flat buffer, in this
 * order (all device memory):
 *   first stage:  wte [Vt, C] (rows [tp Vt, (tp+1) Vt) of the token embedding),
 *                 wpe [T, C] (positions, replicated over the tensor group)
 *   every stage:  its blocks, one gpt_tp shard each (gpt_tp_block_count floats)
 *   last stage:   lnf.w [C], lnf.b [C] (final layer norm, replicated), then, when p > 1,
 *                 its own copy of wte [Vt, C], the LM head's weight (tied: the same values
 *                 as the first stage's)
 *   then zeros up to `count`, a multiple of d, so that the buffer splits into d shards.
 * With p = 1 the one stage has all of it and one wte serves the embedding and the head. */
typedef struct {
    td_config cfg;
    const td_grid *grid;       /* the groups                                            */
    gpt_config block;          /* one micro-batch through a block: seq T, batch b, C, H, F
                                  (vocab 0): what gpt_tp_* take                          */
    int first_layer, nlayers;  /* blocks [first_layer, first_layer + nlayers)           */
    bool first, last;          /* pp == 0, pp == p - 1 (both when p = 1)                */
    float *params, *grads;     /* [count] each                                          */
    size_t count;              /* a multiple of d                                       */
    gpt_block_params *blocks;  /* [nlayers] views into params                           */
    gpt_block_params *dblocks; /* [nlayers] the same views into grads                   */
    float *wte, *dwte;         /* [Vt, C] first stage's, or the last stage's copy; NULL on
                                  the stages between                                    */
    float *wpe, *dwpe;         /* [T, C] first stage only (else NULL)                   */
    float *lnf_w, *lnf_b, *dlnf_w, *dlnf_b; /* [C] each, last stage only (else NULL)    */
    const td_segment *seg;     /* what params[0 .. count) holds, in order; the padding at
                                  the end is in no segment                              */
    int nseg;
    float *adam_m, *adam_v;    /* [count / d] each: this rank's shard of Adam's moments,
                                  zero before the first step                            */
    int step;                  /* Adam's t: steps taken so far                          */
    gpt_tp_workspace *ws;      /* for every gpt_tp_* call of this stage                 */
} td_stage;

/* One step's data, host memory, [m][T, b] ids in [0, V): micro-batch k at + k*T*b. */
typedef struct {
    const int *tokens;  /* first stage only (NULL elsewhere)                             */
    const int *targets; /* last stage only (NULL elsewhere)                              */
} td_batch;

typedef struct {
    double loss;      /* last stage: the mean loss of this data replica's m micro-batches;
                         0 elsewhere                                                      */
    double grad_norm; /* every rank: the global gradient norm, before clipping           */
} td_result;

/* ==================================================================================== */
/* What you implement (threed.c)                                                         */
/* ==================================================================================== */

/* TD_OK, or the first problem of c on a world of `world` ranks, in the order TD_ERR_WORLD,
 * TD_ERR_BATCH (micro < 1, seq, batch, hidden, heads, ffn, vocab or layers < 1, or
 * hidden % heads), TD_ERR_HEADS, TD_ERR_VOCAB, TD_ERR_LAYERS. No communication. */
int td_config_check(const td_config *c, int world);

/* Build the grid of t * p * d = pl_world() ranks from the world with pl_comm_split (a
 * negative colour gives a rank no group: NULL). TD_ERR_WORLD, before any communication
 * and with g untouched, when t < 1, p < 1 or t * p does not divide the world. */
int td_grid_build(td_grid *g, int t, int p);
void td_grid_free(td_grid *g); /* pl_comm_free every group (NULL is fine) */

/* The vocabulary-parallel embedding over the tensor group (t ranks, this rank r):
 * x [N, C] (device, written) = wte_full[tokens] + wpe[position], where this rank holds
 * wte = rows [r Vt, (r+1) Vt) of wte_full ([Vt, C], device) and the whole wpe ([T, C]):
 * each rank looks up the tokens it holds (zeros for the others), the partial results are
 * summed by one all-reduce of N*C floats, and the positions are added once. tokens: host
 * [T, b]. Nothing else communicates. */
void td_embed_forward(float *x, const float *wte, const float *wpe, const int *tokens, int T, int b, int C,
                      int V, pl_comm *tensor, pl_stream *s);
/* The gradients of that lookup, accumulated (+=): dwte [Vt, C] gets the rows of dx [N, C]
 * whose token this rank holds, dwpe [T, C] every row (every tensor rank computes the
 * same dwpe). No communication. */
void td_embed_backward(float *dwte, float *dwpe, const float *dx, const int *tokens, int T, int b, int C, int V,
                       pl_comm *tensor, pl_stream *s);

/* The parallel softmax cross-entropy of N rows whose logits are split over the tensor
 * group by vocabulary: logits [N, Vt] (device) are this rank's columns [r Vt, (r+1) Vt).
 * losses [N] (host, written): -log softmax(row)[target]; dlogits [N, Vt] (device,
 * written) = scale * (softmax(row) - onehot(target)) on this rank's columns. targets:
 * host [N] in [0, V). The full logits are never gathered: three all-reduces of N floats
 * (the row maxima, the target logits, the sums of exponentials). */
void td_xent(float *dlogits, double *losses, const float *logits, const int *targets, int N, int V, float scale,
             pl_comm *tensor, pl_stream *s);

/* One training step of this rank's stage on its replica's batch; every rank of the grid
 * calls it. What it must do, in this order:
 *   - zero st->grads;
 *   - run the 1F1B list of its stage (td_schedule_1f1b) over the m micro-batches:
 *       F(i): the input is td_embed_forward of micro-batch i's tokens (first stage) or the
 *             [N, C] activation received from the previous stage; the stage's blocks
 *             (gpt_tp_block_forward over grid->tensor, one record per block and micro-batch
 *             in flight); then send the output to the next stage, or (last stage) the
 *             head: final layer norm, logits = lnf(x) wte^T [N, Vt], td_xent with
 *             scale 1/(m N) (the replica's mean loss over its m micro-batches);
 *       B(i): the output gradient is received from the next stage or made by the head
 *             (dlnf = dlogits wte, all-reduced over the tensor group; dwte += dlogits^T lnf;
 *             the layer norm's backward); the blocks backward (gpt_tp_block_backward,
 *             last block first); send dx to the previous stage, or (first stage)
 *             td_embed_backward;
 *     sends and receives on grid->pipeline (N*C floats each, peers pp +- 1) paired so that
 *     nothing can deadlock (pl_send completes only when the receive is posted);
 *   - p > 1: all-reduce dwte over grid->embed (the tied embedding's two halves: Vt*C floats);
 *   - the data group, d > 1: reduce-scatter st->grads (average over the replicas) so that
 *     data rank dp holds shard [dp count/d, (dp+1) count/d);
 *   - the global norm of the gradient: the sum of squares of this rank's shard, each
 *     parameter of the model counted once (st->seg), summed by one all-reduce of one float
 *     over the world (none on one rank); result->grad_norm = its square root;
 *   - clip: when the norm exceeds cfg.max_norm, scale the shard by max_norm / (norm + 1e-6);
 *   - AdamW on the shard (kern_optim_adamw with st->adam_m, st->adam_v, t = ++st->step);
 *   - d > 1: all-gather the updated parameter shards over the data group.
 * Exactly that communication and nothing else (no collective on a group of one rank).
 * result->loss as documented above. Returns TD_OK. */
int td_train_step(td_stage *st, const td_batch *batch, td_result *result);

#endif
