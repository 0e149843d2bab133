/* pl_planner.h - the 3D-parallelism planner: the time and memory of one training iteration
 * of a GPT under tensor x pipeline x data parallelism on a machine profile, from the cost
 * model's formulas (pl_costmodel.h), and a search over the configurations that fit.
 *
 * Nothing is measured or fitted here: GEMMs are priced by the roofline (plc_gemm_time),
 * elementwise kernels by theirs (plc_kernel_time, with the kit's byte and flop counts),
 * collectives by alpha-beta on the link their group crosses (plc_coll_time, plc_p2p_time),
 * and the pipeline by its bubble. docs/cost-model.md ("The planner") writes out every term.
 *
 * Rank layout (Megatron's): rank = tp + t * (dp + d * pp), tensor innermost; rank r lives on
 * node r / gpus_per_node. Precision: weights and activations in the profile's element size
 * (bf16 on dgx-a100), gradients accumulated and reduced in fp32, Adam state in fp32.
 */
#ifndef PL_PLANNER_H
#define PL_PLANNER_H

#include <stdbool.h>
#include <stddef.h>

#include "pl_costmodel.h" // defines: plc_profile

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int layers, hidden, heads, vocab, seq; /* l, h, a, V, s                            */
    int ffn;                               /* MLP width; 0 means 4h (GPT's)            */
    bool dropout;                          /* Megatron's dropouts (attention probabilities
                                            * and the two hidden ones), each its own pass;
                                            * the kit's block has none                   */
} plp_model;

typedef struct {
    int t, p, d;     /* tensor, pipeline and data-parallel degrees: t p d GPUs           */
    int v;           /* model chunks per pipeline stage (interleaved 1F1B when > 1)      */
    int b;           /* micro-batch size, sequences                                      */
    bool recompute;  /* full activation recomputation: every layer's forward runs twice  */
    bool zero1;      /* optimizer state sharded over the data group (distributed optimizer) */
} plp_config;

/* The parts of an iteration, seconds on its critical path; they add up to the total. */
typedef enum {
    PLP_GEMM,    /* GEMMs of the slowest stage, every micro-batch                        */
    PLP_KERNEL,  /* its elementwise kernels (layer norms, softmax, GELU, bias, residual, loss) */
    PLP_TENSOR,  /* its tensor-parallel collectives                                      */
    PLP_ACCUM,   /* adding each micro-batch's weight gradients into the fp32 buffers     */
    PLP_P2P,     /* activations and gradients between stages                             */
    PLP_BUBBLE,  /* the pipeline's fill and drain: (p - 1) / v micro-batch times         */
    PLP_EMBED,   /* the tied embedding's gradient all-reduce (first and last stage)      */
    PLP_DATA,    /* the data group's gradient all-reduce (or reduce-scatter + all-gather) */
    PLP_OPTIM,   /* the optimizer step and the gradient norm's all-reduce                */
    PLP_NTERMS
} plp_term;
const char *plp_term_name(plp_term t);

/* Which group a collective runs in, for plp_group_nodes. */
typedef enum { PLP_GROUP_TENSOR, PLP_GROUP_DATA, PLP_GROUP_PIPE_NEXT, PLP_GROUP_EMBED, PLP_GROUP_WORLD } plp_group;

typedef struct {
    plp_config cfg;
    int m;                    /* micro-batches per data replica: B / (d b)              */
    double time;              /* one iteration, s                                       */
    double term[PLP_NTERMS];  /* its parts, s                                           */
    double t_micro;           /* one micro-batch through the slowest stage, messages included */
    double params;            /* parameters per GPU on the largest stage                */
    double mem;               /* bytes per GPU on the fullest stage                     */
    double mem_state;         /* of which weights, gradients and optimizer state        */
    double mem_acts;          /* of which activations (and the last stage's logits)      */
    double flops;             /* the paper's F for the iteration (96 or 72 formula)     */
    double tflops;            /* F / (time * GPUs), TFLOP/s per GPU                     */
    bool fits;                /* mem <= the profile's memory_GB (true when not given)   */
} plp_estimate;

/* The paper's FLOPs per iteration of B sequences (Narayanan et al., SC21, appendix):
 * with full recomputation 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), without it
 * 72 B s l h^2 (1 + s/(6h) + V/(12 l h)). Exact for ffn = 4h. */
double plp_paper_flops(const plp_model *m, double B, bool recompute);
/* The pipeline bubble over the ideal time: (p - 1) / (v m). */
double plp_bubble(int p, int v, int m);
/* How many nodes the group of rank 0 spans (PLP_GROUP_PIPE_NEXT: rank 0 and its next
 * stage's rank, or 1 when p = 1). */
int plp_group_nodes(const plc_profile *prof, const plp_config *c, plp_group g);
/* Parameters one GPU holds on stage `stage` (its tensor shard of its layers; the first
 * stage adds the vocabulary shard and the positions, the last the tied copy and the
 * final layer norm). */
double plp_stage_params(const plp_model *m, const plp_config *c, int stage);
/* Bytes per parameter of weights + fp32 gradients + optimizer state (the state divided
 * by d under ZeRO-1): element 2: 2 + 4 + 12 (or 6 + 12/d); element 4: 4 + 4 + 8. */
double plp_state_bytes_per_param(const plc_profile *prof, const plp_config *c);
/* Activation bytes of one layer for one micro-batch (Korthikanti et al., 16-bit, tensor
 * parallel without sequence parallelism), scaled to the profile's element size:
 * (s b h (10 + 24/t) + 5 a s^2 b / t) * element / 2. */
double plp_layer_activation_bytes(const plc_profile *prof, const plp_model *m, const plp_config *c);

/* 0 when c can run m on B sequences (divisibility: t | heads, vocabulary and ffn; p v |
 * layers; d b | B; interleaving needs p > 1 and m a multiple of p); else -1 and why. */
int plp_check(const plp_model *m, const plp_config *c, int B, char *why, size_t len);
/* The estimate of a valid configuration (plp_check first). */
void plp_estimate_config(const plc_profile *prof, const plp_model *m, const plp_config *c, int B,
                         plp_estimate *e);
/* The largest part of the iteration other than the GEMMs (what to look at when a
 * prediction misses). */
plp_term plp_dominant_overhead(const plp_estimate *e);

/* Every valid configuration of `gpus` GPUs for B sequences that fits in memory: t a
 * divisor of gpus_per_node, p of the layers, micro-batches 1..64 (powers of two), v 1..8,
 * with and without recomputation and ZeRO-1; sorted by time, the fastest first. Writes
 * at most cap to out; returns how many fit (possibly more than cap). */
size_t plp_search(const plc_profile *prof, const plp_model *m, int gpus, int B, plp_estimate *out,
                  size_t cap);

#ifdef __cplusplus
}
#endif

#endif
