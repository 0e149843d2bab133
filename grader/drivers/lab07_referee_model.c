/* lab07_referee_model.c - the referee's inputs and reference for Lab 7, on host arrays only
 * (no device memory, no student code): the model's description (units and tensors), each
 * unit's initial parameters from the counter RNG, each rank's sequences of a step, and the
 * single-rank training run every sharded run is compared with — models/gpt_host.h (plain
 * loops, double accumulation) and AdamW with global-norm clipping written here in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_* (the host model)
#include "lab07.h"

const l7_variant_info L7_VARIANTS[L7_NVARIANTS] = {
    {"z1", 1, true, ZERO_FP32, ZERO_FP32},           {"z2", 2, true, ZERO_FP32, ZERO_FP32},
    {"z3", 3, true, ZERO_FP32, ZERO_FP32},           {"z3n", 3, false, ZERO_FP32, ZERO_FP32},
    {"bf16.z1", 1, true, ZERO_BF16, ZERO_BF16},      {"bf16.z2", 2, true, ZERO_BF16, ZERO_FP32},
    {"bf16.z3", 3, true, ZERO_BF16, ZERO_BF16},
};

gpt_config l7_model_config(const lab7 *L, int batch) {
    return (gpt_config){.seq = L->seq, .batch = batch, .hidden = L->hidden, .heads = L->heads, .ffn = L->ffn,
                        .vocab = L->vocab, .max_pos = L->seq};
}

/* Unit u of a model with `layers` blocks: which gpt part and layer it is. */
static gpt_part part_of(int u, int layers, int *layer) {
    *layer = u >= 1 && u <= layers ? u - 1 : 0;
    return u == 0 ? GPT_PART_EMBED : u == layers + 1 ? GPT_PART_HEAD : GPT_PART_BLOCK;
}

void l7_describe(zero_model *m, const gpt_config *mc, int layers) {
    memset(m, 0, sizeof *m);
    m->nunits = layers + 2;
    PL_CHECK(m->nunits <= ZERO_MAX_UNITS, "too many layers for ZERO_MAX_UNITS");
    for (int u = 0; u < m->nunits; u++) {
        int layer;
        gpt_part part = part_of(u, layers, &layer);
        zero_unit *un = &m->unit[u];
        un->first = m->ntensors;
        un->count = gpt_part_ntensors(part);
        for (int i = 0; i < un->count; i++) {
            gpt_tensor_info ti = gpt_tensor(mc, part, i, layer);
            zero_tensor *t = &m->tensor[m->ntensors++];
            if (part == GPT_PART_BLOCK) snprintf(t->name, sizeof t->name, "h%d.%s", layer, ti.name);
            else snprintf(t->name, sizeof t->name, "%s", ti.name);
            t->unit = u;
            /* a vector (1 x n in gpt.h) is split on its n elements, as torch.chunk splits a [n] */
            t->dim0 = ti.rows == 1 ? (size_t)ti.cols : (size_t)ti.rows;
            t->row = ti.rows == 1 ? 1 : (size_t)ti.cols;
            t->numel = t->dim0 * t->row;
            t->offset = ti.offset;
        }
        un->numel = gpt_part_count(mc, part);
        m->numel += un->numel;
    }
}

zero_config l7_config(const lab7 *L, l7_variant v) {
    const l7_variant_info *vi = &L7_VARIANTS[v];
    return (zero_config){.stage = vi->stage, .reshard_after_forward = vi->reshard, .param_dtype = vi->param,
                         .reduce_dtype = vi->reduce, .bucket_cap = L->cap, .lr = (float)L->lr, .beta1 = L7_BETA1,
                         .beta2 = L7_BETA2, .eps = (float)L->eps, .weight_decay = (float)L->wd,
                         .max_norm = (float)L->max_norm};
}

float *l7_init_unit(const zero_model *m, const gpt_config *mc, uint64_t seed, int u) {
    int layers = m->nunits - 2, layer;
    gpt_part part = part_of(u, layers, &layer);
    float *h = malloc((m->unit[u].numel + 1) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    for (int i = 0; i < gpt_part_ntensors(part); i++) {
        gpt_tensor_info ti = gpt_tensor(mc, part, i, layer);
        pl_rng_fill_host(h + ti.offset, ti.rows, ti.cols, ti.cols, 0, 0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
    }
    return h;
}

void l7_batch(const lab7 *L, int step, int j0, int b, int **tokens, int **targets) {
    int T = L->seq, G = L->batch;
    *tokens = malloc((size_t)T * b * sizeof(int));
    *targets = malloc((size_t)T * b * sizeof(int));
    PL_CHECK(*tokens && *targets, "out of host memory");
    for (int t = 0; t < T; t++)
        for (int j = 0; j < b; j++) {
            uint64_t i = (uint64_t)t * G + (uint64_t)(j0 + j); /* element (t, j0 + j) of [T, G] */
            (*tokens)[t * b + j] = (int)(pl_rng_bits(L->data_seed, 700 + (uint64_t)step, i) % (uint64_t)L->vocab);
            (*targets)[t * b + j] = (int)(pl_rng_bits(L->data_seed, 900 + (uint64_t)step, i) % (uint64_t)L->vocab);
        }
}

void l7_inputs(const lab7 *L, l7_in *in, l7_variant v, int world, int rank, int first, int steps) {
    memset(in, 0, sizeof *in);
    int b = L->batch / world;
    in->mc = l7_model_config(L, b);
    in->cfg = l7_config(L, v);
    in->steps = steps;
    in->measure = true;
    gpt_config mg = l7_model_config(L, L->batch);
    for (int u = 0; u < L->model.nunits; u++) in->init[u] = l7_init_unit(&L->model, &mg, L->seed, u);
    size_t n = (size_t)L->seq * b;
    in->tokens = malloc((size_t)steps * n * sizeof(int));
    in->targets = malloc((size_t)steps * n * sizeof(int));
    PL_CHECK(in->tokens && in->targets, "out of host memory");
    for (int s = 0; s < steps; s++) {
        int *tk, *tg;
        l7_batch(L, first + s, rank * b, b, &tk, &tg);
        memcpy(in->tokens + s * n, tk, n * sizeof(int));
        memcpy(in->targets + s * n, tg, n * sizeof(int));
        free(tk), free(tg);
    }
}

void l7_in_free(l7_in *in, int nunits) {
    for (int u = 0; u < nunits; u++) free(in->init[u]);
    free(in->tokens), free(in->targets);
    memset(in, 0, sizeof *in);
}

/* ==================================================================================== */
/* The single-rank reference                                                             */
/* ==================================================================================== */

static float bf16_of(float x) { return pl_bf16_to_float(pl_bf16_from_float(x)); }

/* The host model's parameter structs over unit buffers. */
typedef struct {
    gpt_config c;
    int layers;
    gpt_embed_params e, de;
    gpt_block_params *b, *db;
    gpt_head_params h, dh;
} host_model;

static void bind(float **t, float **base, size_t *count, float *buf, const zero_model *m, int u) {
    for (int i = 0; i < m->unit[u].count; i++) t[i] = buf + m->tensor[m->unit[u].first + i].offset;
    *base = buf;
    *count = m->unit[u].numel;
}

/* One forward and backward of the whole global batch: the loss, and every unit's gradient
 * of the mean loss into grad[u]. */
static double host_grads(const lab7 *L, const zero_model *m, float **param, float **grad, const int *tok,
                         const int *tgt) {
    host_model hm;
    hm.c = l7_model_config(L, L->batch);
    hm.layers = m->nunits - 2;
    hm.b = calloc((size_t)hm.layers, sizeof *hm.b);
    hm.db = calloc((size_t)hm.layers, sizeof *hm.db);
    gpt_host_acts *a = calloc((size_t)hm.layers, sizeof *a);
    PL_CHECK(hm.b && hm.db && a, "out of host memory");
    int U = m->nunits;
    for (int u = 0; u < U; u++) memset(grad[u], 0, m->unit[u].numel * sizeof(float));
    bind(hm.e.t, &hm.e.base, &hm.e.count, param[0], m, 0);
    bind(hm.de.t, &hm.de.base, &hm.de.count, grad[0], m, 0);
    bind(hm.h.t, &hm.h.base, &hm.h.count, param[U - 1], m, U - 1);
    bind(hm.dh.t, &hm.dh.base, &hm.dh.count, grad[U - 1], m, U - 1);
    for (int l = 0; l < hm.layers; l++) {
        bind(hm.b[l].t, &hm.b[l].base, &hm.b[l].count, param[1 + l], m, 1 + l);
        bind(hm.db[l].t, &hm.db[l].base, &hm.db[l].count, grad[1 + l], m, 1 + l);
        gpt_host_acts_alloc(&a[l], &hm.c);
    }
    size_t NC = (size_t)hm.c.seq * hm.c.batch * hm.c.hidden;
    float *x = malloc(NC * sizeof *x), *dx = malloc(NC * sizeof *dx), *dy = malloc(NC * sizeof *dy);
    PL_CHECK(x && dx && dy, "out of host memory");
    gpt_host_head_acts ha;
    gpt_host_head_acts_alloc(&ha, &hm.c);
    gpt_host_embed_forward(&hm.c, &hm.e, x, tok);
    for (int l = 0; l < hm.layers; l++) {
        gpt_host_block_forward(&hm.c, &hm.b[l], &a[l], dy, x);
        memcpy(x, dy, NC * sizeof *x);
    }
    double loss = gpt_host_head_forward(&hm.c, &hm.h, &ha, x, tgt);
    gpt_host_head_backward(&hm.c, &hm.h, &hm.dh, &ha, dy, 1.0f);
    for (int l = hm.layers - 1; l >= 0; l--) {
        gpt_host_block_backward(&hm.c, &hm.b[l], &hm.db[l], &a[l], dx, dy);
        float *t = dx;
        dx = dy, dy = t;
    }
    gpt_host_embed_backward(&hm.c, &hm.de, dy, tok);
    for (int l = 0; l < hm.layers; l++) gpt_host_acts_free(&a[l]);
    gpt_host_head_acts_free(&ha);
    free(a), free(hm.b), free(hm.db), free(x), free(dx), free(dy);
    return loss;
}

const l7_ref *l7_reference(lab7 *L, zero_dtype dtype) {
    if (L->ref[dtype]) return L->ref[dtype];
    const zero_model *m = &L->model;
    int U = m->nunits;
    l7_ref *r = calloc(1, sizeof *r);
    PL_CHECK(r != NULL, "out of host memory");
    r->steps = L->steps, r->dtype = dtype;
    gpt_config mg = l7_model_config(L, L->batch);
    float *grad[ZERO_MAX_UNITS];
    for (int u = 0; u < U; u++) {
        size_t n = m->unit[u].numel;
        r->master[u] = l7_init_unit(m, &mg, L->seed, u);
        r->param[u] = malloc((n + 1) * sizeof(float));
        r->m[u] = calloc(n + 1, sizeof(float)), r->v[u] = calloc(n + 1, sizeof(float));
        grad[u] = malloc((n + 1) * sizeof(float));
        PL_CHECK(r->param[u] && r->m[u] && r->v[u] && grad[u], "out of host memory");
    }
    for (int s = 0; s < r->steps; s++) {
        /* what the kit computes with: the master itself, or its bf16 rounding */
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++)
                r->param[u][i] = dtype == ZERO_BF16 ? bf16_of(r->master[u][i]) : r->master[u][i];
        int *tok, *tgt;
        l7_batch(L, s, 0, L->batch, &tok, &tgt);
        r->loss[s] = host_grads(L, m, r->param, grad, tok, tgt);
        free(tok), free(tgt);
        /* bf16: the gradient is stored in bf16 before anything reads it */
        double sumsq = 0;
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++) {
                if (dtype == ZERO_BF16) grad[u][i] = bf16_of(grad[u][i]);
                sumsq += (double)grad[u][i] * grad[u][i];
            }
        double coef = L->max_norm / (sqrt(sumsq) + 1e-6);
        coef = coef < 1 ? coef : 1;
        /* AdamW, t = s + 1, in double; the state is kept in float, as on the device */
        double c1 = 1 - pow(L7_BETA1, s + 1), c2 = 1 - pow(L7_BETA2, s + 1);
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++) {
                double g = coef * grad[u][i], p = r->master[u][i];
                double mm = L7_BETA1 * (double)r->m[u][i] + (1 - L7_BETA1) * g;
                double vv = L7_BETA2 * (double)r->v[u][i] + (1 - L7_BETA2) * g * g;
                p -= L->lr * L->wd * p;
                p -= L->lr * (mm / c1) / (sqrt(vv / c2) + L->eps);
                r->m[u][i] = (float)mm, r->v[u][i] = (float)vv, r->master[u][i] = (float)p;
            }
    }
    for (int u = 0; u < U; u++) {
        for (size_t i = 0; i < m->unit[u].numel; i++)
            r->param[u][i] = dtype == ZERO_BF16 ? bf16_of(r->master[u][i]) : r->master[u][i];
        free(grad[u]);
    }
    L->ref[dtype] = r;
    return r;
}

/* README.md, "How close can a bf16 run be": a sharded bf16 run rounds every rank's local
 * gradient to bf16 (and, reducing in bf16, the partial sums) where the single-rank run rounds
 * the global gradient once; the averaged gradients differ by a relative d ~ 2^-8.
 *   drift: an AdamW step moves an element by about lr times a normalised moment of order 1,
 *          so a relative change d moves it by about lr * d: over k steps k * lr * d per
 *          element, k * lr * 2^-8 * sqrt(Ψ) in all (measured up to 3 times that: local
 *          gradients are larger than their average);
 *   flips: an element whose global gradient is smaller than the roundings of the local ones
 *          can step the other way, by lr whatever its size (m/sqrt(v) = +-1 at the first step):
 *          up to 2 * k * lr apart. Measured: at most 13 such elements of 11 408 (1.1e-3) over
 *          36 data seeds at 2, 4 and 8 ranks; the bound allows a fraction f = 3e-3.
 * Relative to the parameters: k * lr * (3 * 2^-8 * sqrt(Ψ) + 2 * sqrt(f Ψ)) / |p0|. */
double l7_bf16_tolerance(const lab7 *L, int world) {
    (void)world;
    gpt_config mg = l7_model_config(L, L->batch);
    double sq = 0, psi = (double)L->model.numel, f = 3e-3;
    for (int u = 0; u < L->model.nunits; u++) {
        float *p = l7_init_unit(&L->model, &mg, L->seed, u);
        for (size_t i = 0; i < L->model.unit[u].numel; i++) sq += (double)p[i] * p[i];
        free(p);
    }
    return L->steps * L->lr * (3 * ldexp(1.0, -8) * sqrt(psi) + 2 * sqrt(f * psi)) / sqrt(sq);
}
