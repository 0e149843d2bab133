/* pl_planner.c - the 3D-parallelism planner (pl_planner.h): one training iteration of a GPT
 * priced term by term with the cost model's formulas, and the search over configurations.
 * docs/cost-model.md ("The planner") states each term. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_planner.h"    // defines: the API implemented here
#include "pl_runtime.h"    // defines: PL_CHECK

static const char *const TERM_NAMES[PLP_NTERMS] = {
    "GEMMs", "kernels", "tensor all-reduces", "gradient accumulation", "pipeline sends",
    "pipeline bubble", "embedding all-reduce", "data-parallel reduction", "optimizer"};

const char *plp_term_name(plp_term t) { return t >= 0 && t < PLP_NTERMS ? TERM_NAMES[t] : "?"; }

static int ffn_of(const plp_model *m) { return m->ffn > 0 ? m->ffn : 4 * m->hidden; }
static int elem_of(const plc_profile *p) { return p->elem_bytes == 2 ? 2 : 4; }

/* ==================================================================================== */
/* The closed forms                                                                       */
/* ==================================================================================== */

double plp_paper_flops(const plp_model *m, double B, bool recompute) {
    double s = m->seq, l = m->layers, h = m->hidden, V = m->vocab;
    if (recompute) return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

double plp_bubble(int p, int v, int m) { return m > 0 && v > 0 ? (double)(p - 1) / ((double)v * m) : 0; }

/* Distinct nodes among `count` ranks first, first + stride, ... */
static int nodes_of(const plc_profile *prof, long first, long stride, long count) {
    int n = 0;
    long last_node = -1;
    for (long i = 0; i < count; i++) {
        long node = (first + i * stride) / prof->gpus_per_node;
        if (node != last_node) n++, last_node = node; /* members ascend: nodes ascend */
    }
    return n > 0 ? n : 1;
}

int plp_group_nodes(const plc_profile *prof, const plp_config *c, plp_group g) {
    long t = c->t, d = c->d, p = c->p;
    switch (g) {
    case PLP_GROUP_TENSOR: return nodes_of(prof, 0, 1, t);
    case PLP_GROUP_DATA: return nodes_of(prof, 0, t, d);
    case PLP_GROUP_PIPE_NEXT: return p > 1 ? nodes_of(prof, 0, t * d, 2) : 1;
    case PLP_GROUP_EMBED: return p > 1 ? nodes_of(prof, 0, t * d * (p - 1), 2) : 1;
    case PLP_GROUP_WORLD: return nodes_of(prof, 0, 1, t * d * p);
    }
    return 1;
}

/* Parameters of one transformer layer on one tensor rank: the sharded weights and biases
 * and the replicated ones (two layer norms, the row-parallel layers' biases). */
static double layer_params(const plp_model *m, int t) {
    double C = m->hidden, F = ffn_of(m);
    return (3 * C * C + 3 * C + C * C + F * C + F + C * F) / t + 6 * C;
}

double plp_stage_params(const plp_model *m, const plp_config *c, int stage) {
    double n = layer_params(m, c->t) * m->layers / c->p, C = m->hidden;
    if (stage == 0) n += (double)m->vocab * C / c->t + (double)m->seq * C;
    if (stage == c->p - 1) n += 2 * C + (c->p > 1 ? (double)m->vocab * C / c->t : 0);
    return n;
}

double plp_state_bytes_per_param(const plc_profile *prof, const plp_config *c) {
    double e = elem_of(prof), optim = e < 4 ? 12 : 8; /* fp32 master (mixed precision only), m, v */
    return e + 4 + (c->zero1 ? optim / c->d : optim);
}

double plp_layer_activation_bytes(const plc_profile *prof, const plp_model *m, const plp_config *c) {
    double s = m->seq, b = c->b, h = m->hidden, a = m->heads, t = c->t;
    return (s * b * h * (10 + 24 / t) + 5 * a * s * s * b / t) * elem_of(prof) / 2;
}

int plp_check(const plp_model *m, const plp_config *c, int B, char *why, size_t len) {
#define BAD(...) do { if (why && len) snprintf(why, len, __VA_ARGS__); return -1; } while (0)
    if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->vocab < 1 || m->seq < 1 || m->hidden % m->heads)
        BAD("the model needs layers, hidden, heads, vocabulary and sequence >= 1, heads dividing hidden");
    if (c->t < 1 || c->p < 1 || c->d < 1 || c->v < 1 || c->b < 1) BAD("t, p, d, v and b must all be >= 1");
    if (m->heads % c->t || m->vocab % c->t || ffn_of(m) % c->t)
        BAD("t %d must divide the heads %d, the vocabulary %d and the MLP width %d", c->t, m->heads, m->vocab, ffn_of(m));
    if (m->layers % (c->p * c->v)) BAD("p v = %d does not divide the %d layers", c->p * c->v, m->layers);
    if (B < 1 || B % (c->d * c->b)) BAD("d b = %d does not divide the global batch %d", c->d * c->b, B);
    int micro = B / (c->d * c->b);
    if (c->v > 1 && (c->p == 1 || micro % c->p))
        BAD("interleaving (v = %d) needs p > 1 and micro-batches (%d) a multiple of p = %d", c->v, micro, c->p);
    return 0;
#undef BAD
}

/* ==================================================================================== */
/* One micro-batch through one layer, on one tensor rank                                  */
/* ==================================================================================== */

typedef struct {
    double t[PLP_NTERMS];
} terms;

/* One GEMM (m x n x k), or `count` of them in one batched call, by the roofline. */
static double gemm(const plc_profile *p, double count, double m, double n, double k) {
    return plc_gemm_shape_time(p, count, m, n, k, elem_of(p));
}

/* A kernel of the kit with its fp32 byte count (docs/cost-model.md, "What a kernel
 * counts"), moved at the profile's element size. */
static double kernel(const plc_profile *p, double flops, double fp32_bytes) {
    return plc_kernel_time(p, flops, fp32_bytes * elem_of(p) / 4);
}

/* Dropout over `elems` elements, one direction: two E-byte tensors and a 1-byte mask. */
static double dropout(const plc_profile *p, double elems) { return plc_kernel_time(p, elems, elems * (2 * elem_of(p) + 1)); }

static double allreduce(const plc_profile *p, int n, int nodes, double bytes) {
    return plc_coll_time(p, PL_OP_ALLREDUCE, n, nodes, bytes);
}

/* The kit's block (models/gpt.h, models/gpt_tp.h): forward and fused backward, the
 * layer's own collectives (two all-reduces each way), and with mixed precision the
 * weight gradients added into their fp32 buffers. */
static void layer_terms(const plc_profile *p, const plp_model *md, const plp_config *c, terms *L) {
    double t = c->t, N = (double)c->b * md->seq, C = md->hidden, F = ffn_of(md), s = md->seq;
    double R = (double)c->b * md->heads / t, hs = C / md->heads, NC = N * C, NF = N * F / t;
    double lin[4][2] = {{3 * C / t, C}, {C, C / t}, {F / t, C}, {C, F / t}}; /* out, in */
    double fwd_g = 0, bwd_g = 0;
    for (int i = 0; i < 4; i++) {
        fwd_g += gemm(p, 1, N, lin[i][0], lin[i][1]);
        bwd_g += gemm(p, 1, N, lin[i][1], lin[i][0]) + gemm(p, 1, lin[i][0], lin[i][1], N);
    }
    fwd_g += gemm(p, R, s, s, hs) + gemm(p, R, s, hs, s);     /* scores, probs x values   */
    bwd_g += gemm(p, R, s, s, hs) + gemm(p, 3 * R, s, hs, s); /* dprobs; dv, dq, dk        */
    double tri = s * (s + 1) / 2, outs[4] = {3 * C / t, C, F / t, C}, fwd_k = 0, bwd_k = 0;
    for (int i = 0; i < 4; i++) {
        fwd_k += kernel(p, N * outs[i], 8 * N * outs[i] + 4 * outs[i]); /* bias            */
        bwd_k += kernel(p, N * outs[i], 4 * N * outs[i] + 8 * outs[i]);
    }
    fwd_k += 2 * kernel(p, 8 * NC + 32 * N, 8 * NC + 8 * C + 8 * N);     /* layer norms     */
    bwd_k += 4 * kernel(p, 14 * NC, 12 * NC + 20 * C + 8 * N);           /* input and weight halves */
    fwd_k += kernel(p, 36 * R * tri, 8 * R * s * s);                      /* softmax         */
    bwd_k += kernel(p, 5 * R * tri, 12 * R * s * s);
    fwd_k += kernel(p, 40 * NF, 8 * NF);                                  /* GELU            */
    bwd_k += kernel(p, 50 * NF, 12 * NF);
    fwd_k += 2 * kernel(p, NC, 12 * NC);                                  /* residuals       */
    bwd_k += 2 * kernel(p, NC, 12 * NC);
    if (md->dropout) {
        /* attention probabilities (b a/t s^2) and the attention and MLP outputs (N h):
         * forward reads the input, writes the output and a byte of mask per element;
         * backward reads the gradient and the mask, writes the gradient */
        double pr = R * s * s;
        fwd_k += dropout(p, pr) + 2 * dropout(p, NC);
        bwd_k += dropout(p, pr) + 2 * dropout(p, NC);
    }
    double ar = allreduce(p, c->t, plp_group_nodes(p, c, PLP_GROUP_TENSOR), NC * elem_of(p));
    double passes = c->recompute ? 2 : 1; /* the forward again before the backward */
    memset(L, 0, sizeof *L);
    L->t[PLP_GEMM] = passes * fwd_g + bwd_g;
    L->t[PLP_KERNEL] = passes * fwd_k + bwd_k;
    L->t[PLP_TENSOR] = (2 * passes + 2) * ar;
    if (elem_of(p) < 4) L->t[PLP_ACCUM] = plc_kernel_time(p, 0, layer_params(md, c->t) * (elem_of(p) + 8));
}

/* The vocabulary-parallel embedding (first stage) or the loss head with the tied LM
 * weight and the parallel cross-entropy in fp32 (last stage), for one micro-batch. */
static void end_terms(const plc_profile *p, const plp_model *md, const plp_config *c, bool head, terms *E) {
    double t = c->t, N = (double)c->b * md->seq, C = md->hidden, Vt = (double)md->vocab / t, NC = N * C;
    int nodes = plp_group_nodes(p, c, PLP_GROUP_TENSOR);
    memset(E, 0, sizeof *E);
    if (!head) {
        E->t[PLP_KERNEL] = kernel(p, N * C, (12 * C + 4) * N) + kernel(p, 2 * N * C, (20 * C + 4) * N);
        E->t[PLP_TENSOR] = allreduce(p, c->t, nodes, NC * elem_of(p)); /* the masked lookups summed */
    } else {
        E->t[PLP_GEMM] = gemm(p, 1, N, Vt, C) + gemm(p, 1, Vt, C, N) + gemm(p, 1, N, C, Vt);
        E->t[PLP_KERNEL] = kernel(p, 8 * NC + 32 * N, 8 * NC + 8 * C + 8 * N) + kernel(p, 14 * NC, 12 * NC + 20 * C + 8 * N) +
                           plc_kernel_time(p, 36 * N * Vt + 32 * N, 8 * N * Vt + 8 * N) + /* fp32 */
                           plc_kernel_time(p, 2 * N * Vt, 8 * N * Vt + 4 * N);
        /* max, target logit and sum of exponentials forward; the input gradient backward */
        E->t[PLP_TENSOR] = 3 * allreduce(p, c->t, nodes, 4 * N) + allreduce(p, c->t, nodes, NC * elem_of(p));
    }
    if (elem_of(p) < 4) E->t[PLP_ACCUM] = plc_kernel_time(p, 0, Vt * C * (elem_of(p) + 8));
}

/* One activation (or its gradient) to the next stage. Across nodes each tensor rank sends
 * its 1/t of it over its own adapter and the receiving node all-gathers it (Megatron's
 * scatter/gather); inside a node it goes whole over NVLink. */
static double p2p_time(const plc_profile *p, const plp_model *md, const plp_config *c) {
    double bytes = (double)c->b * md->seq * md->hidden * elem_of(p);
    if (plp_group_nodes(p, c, PLP_GROUP_PIPE_NEXT) == 1) return plc_p2p_time(p, 1, bytes);
    if (c->t == 1) return plc_p2p_time(p, 0, bytes);
    return plc_p2p_time(p, 0, bytes / c->t) +
           plc_coll_time(p, PL_OP_ALLGATHER, c->t, plp_group_nodes(p, c, PLP_GROUP_TENSOR), bytes);
}

/* ==================================================================================== */
/* The iteration                                                                          */
/* ==================================================================================== */

static double sum_terms(const terms *x) {
    double s = 0;
    for (int i = 0; i < PLP_NTERMS; i++) s += x->t[i];
    return s;
}

/* Micro-batches (or, interleaved, chunk passes times their layers) whose activations the
 * first stage holds at once: 1F1B min(p, m); interleaved min(2(p-1) + (v-1)p + 1, v m)
 * chunk passes of l / (p v) layers. Returned in layers' worth. */
static double layers_in_flight(const plp_model *md, const plp_config *c, int m) {
    int p = c->p, v = c->v;
    if (v == 1) return (double)(p < m ? p : m) * md->layers / p;
    int passes = 2 * (p - 1) + (v - 1) * p + 1;
    if (passes > m * v) passes = m * v;
    return (double)passes * md->layers / (p * v);
}

static void memory(const plc_profile *prof, const plp_model *md, const plp_config *c, int m, plp_estimate *e) {
    double per_param = plp_state_bytes_per_param(prof, c), layer = plp_layer_activation_bytes(prof, md, c);
    double input = (double)c->b * md->seq * md->hidden * elem_of(prof), k = layers_in_flight(md, c, m);
    double acts = c->recompute ? k * input + layer : k * layer;
    double logits = 2.0 * c->b * md->seq * ((double)md->vocab / c->t) * 4; /* fp32 logits and their gradient */
    double first = plp_stage_params(md, c, 0), last = plp_stage_params(md, c, c->p - 1);
    /* the last stage holds one micro-batch in flight under 1F1B, plus the logits */
    double last_acts = (c->recompute ? (double)md->layers / (c->p * c->v) * input + layer : (double)md->layers / (c->p * c->v) * layer) + logits;
    if (c->p == 1) acts += logits;
    double m_first = first * per_param + acts, m_last = last * per_param + (c->p == 1 ? acts : last_acts);
    bool first_fuller = m_first >= m_last;
    e->mem = first_fuller ? m_first : m_last;
    e->mem_state = (first_fuller ? first : last) * per_param;
    e->mem_acts = e->mem - e->mem_state;
    e->params = first > last ? first : last;
    e->fits = prof->mem_capacity <= 0 || e->mem <= prof->mem_capacity;
}

void plp_estimate_config(const plc_profile *prof, const plp_model *md, const plp_config *c, int B, plp_estimate *e) {
    memset(e, 0, sizeof *e);
    e->cfg = *c;
    int m = B / (c->d * c->b);
    e->m = m;
    terms layer, emb, head, stage[3];
    layer_terms(prof, md, c, &layer);
    end_terms(prof, md, c, false, &emb);
    end_terms(prof, md, c, true, &head);
    double per_stage = (double)md->layers / c->p;
    /* first, middle and last stage; with p = 1 the one stage has both ends */
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < PLP_NTERMS; i++) stage[k].t[i] = per_stage * layer.t[i];
        for (int i = 0; i < PLP_NTERMS; i++) {
            if (k == 0 || c->p == 1) stage[k].t[i] += emb.t[i];
            if (k == 2 || c->p == 1) stage[k].t[i] += head.t[i];
        }
    }
    const terms *slow = &stage[0];
    for (int k = 1; k < 3; k++)
        if (sum_terms(&stage[k]) > sum_terms(slow)) slow = &stage[k];
    double msg = c->p > 1 ? 2.0 * c->v * p2p_time(prof, md, c) : 0;
    e->t_micro = sum_terms(slow) + msg;
    for (int i = 0; i < PLP_NTERMS; i++) e->term[i] = m * slow->t[i];
    e->term[PLP_P2P] = m * msg;
    e->term[PLP_BUBBLE] = (double)(c->p - 1) / c->v * e->t_micro;
    /* after the last backward: the tied embedding, the data group, the optimizer */
    if (c->p > 1)
        e->term[PLP_EMBED] = allreduce(prof, 2, plp_group_nodes(prof, c, PLP_GROUP_EMBED), (double)md->vocab / c->t * md->hidden * 4);
    double P = plp_stage_params(md, c, 0) > plp_stage_params(md, c, c->p - 1) ? plp_stage_params(md, c, 0) : plp_stage_params(md, c, c->p - 1);
    int dn = plp_group_nodes(prof, c, PLP_GROUP_DATA);
    if (c->zero1)
        e->term[PLP_DATA] = plc_coll_time(prof, PL_OP_REDUCE_SCATTER, c->d, dn, 4 * P) +
                            plc_coll_time(prof, PL_OP_ALLGATHER, c->d, dn, elem_of(prof) * P);
    else
        e->term[PLP_DATA] = allreduce(prof, c->d, dn, 4 * P);
    double owned = c->zero1 ? P / c->d : P;
    e->term[PLP_OPTIM] = plc_kernel_time(prof, 46 * owned, (28 + (elem_of(prof) < 4 ? elem_of(prof) : 0)) * owned) +
                         allreduce(prof, c->t * c->p * c->d, plp_group_nodes(prof, c, PLP_GROUP_WORLD), 4);
    for (int i = 0; i < PLP_NTERMS; i++) e->time += e->term[i];
    memory(prof, md, c, m, e);
    e->flops = plp_paper_flops(md, B, c->recompute);
    e->tflops = e->flops / (e->time * c->t * c->p * c->d) / 1e12;
}

plp_term plp_dominant_overhead(const plp_estimate *e) {
    plp_term best = PLP_KERNEL;
    for (int i = PLP_KERNEL; i < PLP_NTERMS; i++)
        if (e->term[i] > e->term[best]) best = (plp_term)i;
    return best;
}

/* ==================================================================================== */
/* The search                                                                             */
/* ==================================================================================== */

static int by_time(const void *a, const void *b) {
    double x = ((const plp_estimate *)a)->time, y = ((const plp_estimate *)b)->time;
    return x < y ? -1 : x > y;
}

size_t plp_search(const plc_profile *prof, const plp_model *md, int gpus, int B, plp_estimate *out, size_t cap) {
    size_t n = 0, have = 0;
    plp_estimate *all = NULL;
    for (int t = 1; t <= prof->gpus_per_node; t++) {
        if (prof->gpus_per_node % t || gpus % t) continue;
        for (int p = 1; p <= gpus / t; p++) {
            if ((gpus / t) % p || md->layers % p) continue;
            int d = gpus / (t * p);
            for (int b = 1; b <= 64; b *= 2)
                for (int v = 1; v <= (p > 1 ? 8 : 1); v++)
                    for (int r = 0; r < 2; r++)
                        for (int z = 0; z < (d > 1 ? 2 : 1); z++) {
                            plp_config c = {t, p, d, v, b, r == 1, z == 1};
                            if (plp_check(md, &c, B, NULL, 0) != 0) continue;
                            plp_estimate e;
                            plp_estimate_config(prof, md, &c, B, &e);
                            if (!e.fits) continue;
                            if (n == have) {
                                have = have ? 2 * have : 256;
                                all = realloc(all, have * sizeof *all);
                                PL_CHECK(all != NULL, "out of host memory");
                            }
                            all[n++] = e;
                        }
        }
    }
    if (n) qsort(all, n, sizeof *all, by_time);
    if (n && cap) memcpy(out, all, (n < cap ? n : cap) * sizeof *out);
    free(all);
    return n;
}
