/* gpt_host.h - the GPT-2 model of gpt.h as a host reference: plain loops over host arrays,
 * float32 storage, double accumulation, and nothing from kernels/ or pl_gemm, so tests and
 * graders compare the device model (and students' pipelines) against an independent
 * computation of the same math.
 *
 * Same shapes, layouts and parameter structs as gpt.h (here their pointers are host
 * memory): activations [T, b, C] sequence-major, weights [out x in], the per-head q | k | v
 * layout of the fused QKV weight, and gpt_tensor()'s counter-RNG initialisation, so
 * gpt_host_block_init gives the bits gpt_block_init puts on the device.
 */
#ifndef GPT_HOST_H
#define GPT_HOST_H

#include "gpt.h" // defines: gpt_config, gpt_*_params, gpt_tensor

#ifdef __cplusplus
extern "C" {
#endif

/* Host parameter blocks: one zeroed calloc of p->count floats (gradients start at zero),
 * and the serial model's values from the counter RNG. */
void gpt_host_block_alloc(gpt_block_params *p, const gpt_config *c);
void gpt_host_embed_alloc(gpt_embed_params *p, const gpt_config *c);
void gpt_host_head_alloc(gpt_head_params *p, const gpt_config *c);
void gpt_host_params_free(float *base); /* pass p.base */
void gpt_host_block_init(gpt_block_params *p, const gpt_config *c, int layer, uint64_t seed);
void gpt_host_embed_init(gpt_embed_params *p, const gpt_config *c, uint64_t seed);
void gpt_host_head_init(gpt_head_params *p, const gpt_config *c, uint64_t seed);

/* What the host block's forward keeps for its backward (N = T*b rows). */
typedef struct {
    float *x, *ln1, *qkv, *att, *x1, *ln2, *fc1, *gel; /* [N, C] / [N, 3C] / [N, F]     */
    float *mean1, *rstd1, *mean2, *rstd2;              /* [N]                           */
    float *probs;                                      /* [b, H, T, T]                  */
} gpt_host_acts;
void gpt_host_acts_alloc(gpt_host_acts *a, const gpt_config *c);
void gpt_host_acts_free(gpt_host_acts *a);

/* y [N, C] = block(x [N, C]); a keeps the activations. */
void gpt_host_block_forward(const gpt_config *c, const gpt_block_params *p, gpt_host_acts *a,
                            float *y, const float *x);
/* dx [N, C] written from dy [N, C]; every parameter gradient accumulated (+=) into g. */
void gpt_host_block_backward(const gpt_config *c, const gpt_block_params *p, gpt_block_params *g,
                             const gpt_host_acts *a, float *dx, const float *dy);

/* x [N, C] = wte[tokens] + wpe[t]; backward accumulates into g. tokens [T, b] in [0, V):
 * an id outside stops the job with one line naming it. */
void gpt_host_embed_forward(const gpt_config *c, const gpt_embed_params *p, float *x,
                            const int *tokens);
void gpt_host_embed_backward(const gpt_config *c, gpt_embed_params *g, const float *dx,
                             const int *tokens);

/* The loss head: final layer norm, LM head, softmax cross-entropy. */
typedef struct {
    float *x, *lnf;     /* [N, C] */
    float *mean, *rstd; /* [N]    */
    float *probs;       /* [N, V] */
    int *targets;       /* [N]    */
} gpt_host_head_acts;
void gpt_host_head_acts_alloc(gpt_host_head_acts *a, const gpt_config *c);
void gpt_host_head_acts_free(gpt_host_head_acts *a);
/* Mean loss over the N tokens; a keeps what the backward needs. */
double gpt_host_head_forward(const gpt_config *c, const gpt_head_params *p, gpt_host_head_acts *a,
                             const float *x, const int *targets);
/* dx [N, C] = d(loss_scale * mean loss)/dx; parameter gradients accumulated (+=) into g. */
void gpt_host_head_backward(const gpt_config *c, const gpt_head_params *p, gpt_head_params *g,
                            const gpt_host_head_acts *a, float *dx, float loss_scale);
/* The same mean loss with every intermediate in double: the function whose central finite
 * differences check the head's gradients. */
double gpt_host_head_loss(const gpt_config *c, const gpt_head_params *p, const float *x,
                          const int *targets);

#ifdef __cplusplus
}
#endif

#endif
