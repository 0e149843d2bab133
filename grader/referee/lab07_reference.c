/* lab07_reference.c (referee) - Lab 7's data and reference, on host arrays only (no device
 * memory, no student code): each rank's sequences of a step, and the single-rank training run
 * every sharded run is compared with - models/gpt_host.h (plain loops, double accumulation)
 * and AdamW with global-norm clipping written here in double - and the bf16 bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_* (the host model)
#include "lab07_ref.h"

void l7_batch(const l7_lab *L, int step, int j0, int b, int *tokens, int *targets) {
    int T = L->f->seq, G = L->f->batch;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < b; j++) {
            uint64_t i = (uint64_t)t * G + (uint64_t)(j0 + j); /* element (t, j0 + j) of [T, G] */
            tokens[t * b + j] = (int)(pl_rng_bits(L->data_seed, 700 + (uint64_t)step, i) % (uint64_t)L->f->vocab);
            targets[t * b + j] = (int)(pl_rng_bits(L->data_seed, 900 + (uint64_t)step, i) % (uint64_t)L->f->vocab);
        }
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

static void bind(float **t, float **base, size_t *count, float *buf, const l7_model *m, int u) {
    for (int i = 0; i < m->unit[u].count; i++) t[i] = buf + m->tensor[m->unit[u].first + i].offset;
    *base = buf;
    *count = m->unit[u].numel;
}

/* One forward and backward of the whole global batch: the loss, and every unit's gradient
 * of the mean loss into grad[u]. */
static double host_grads(const l7_lab *L, const l7_model *m, float **param, float **grad, const int *tok,
                         const int *tgt) {
    host_model hm;
    hm.c = l7_gpt(L->f, L->f->batch);
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

const l7_ref *l7_reference(l7_lab *L, int dtype) {
    if (L->ref[dtype]) return L->ref[dtype];
    const l7_model *m = &L->model;
    int U = m->nunits;
    l7_ref *r = calloc(1, sizeof *r);
    PL_CHECK(r != NULL, "out of host memory");
    r->steps = L->f->steps, r->dtype = dtype;
    gpt_config mg = l7_gpt(L->f, L->f->batch);
    float *grad[L7_MAX_UNITS];
    for (int u = 0; u < U; u++) {
        size_t n = m->unit[u].numel;
        r->master[u] = l7_init_unit(m, &mg, L->seed, u);
        r->param[u] = malloc((n + 1) * sizeof(float));
        r->m[u] = calloc(n + 1, sizeof(float)), r->v[u] = calloc(n + 1, sizeof(float));
        r->loose[u] = calloc(n + 1, 1);
        grad[u] = malloc((n + 1) * sizeof(float));
        PL_CHECK(r->param[u] && r->m[u] && r->v[u] && r->loose[u] && grad[u], "out of host memory");
    }
    for (int s = 0; s < r->steps; s++) {
        /* what the kit computes with: the master itself, or its bf16 rounding */
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++)
                r->param[u][i] = dtype == L7_BF16 ? bf16_of(r->master[u][i]) : r->master[u][i];
        size_t nt = (size_t)L->f->seq * L->f->batch;
        int *tok = malloc(nt * sizeof *tok), *tgt = malloc(nt * sizeof *tgt);
        PL_CHECK(tok && tgt, "out of host memory");
        l7_batch(L, s, 0, L->f->batch, tok, tgt);
        r->loss[s] = host_grads(L, m, r->param, grad, tok, tgt);
        free(tok), free(tgt);
        /* bf16: the gradient is stored in bf16 before anything reads it */
        double sumsq = 0;
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++) {
                if (dtype == L7_BF16) grad[u][i] = bf16_of(grad[u][i]);
                sumsq += (double)grad[u][i] * grad[u][i];
            }
        double coef = L->f->max_norm / (sqrt(sumsq) + 1e-6);
        coef = coef < 1 ? coef : 1;
        /* AdamW, t = s + 1, in double; the state is kept in float, as on the device */
        double c1 = 1 - pow(L7_BETA1, s + 1), c2 = 1 - pow(L7_BETA2, s + 1);
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++) {
                double g = coef * grad[u][i], p = r->master[u][i];
                double mm = L7_BETA1 * (double)r->m[u][i] + (1 - L7_BETA1) * g;
                double vv = L7_BETA2 * (double)r->v[u][i] + (1 - L7_BETA2) * g * g;
                p -= L->f->lr * L->f->wd * p;
                p -= L->f->lr * (mm / c1) / (sqrt(vv / c2) + L->f->eps);
                r->m[u][i] = (float)mm, r->v[u][i] = (float)vv, r->master[u][i] = (float)p;
            }
        double vsum = 0, total = 0;
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++) vsum += r->v[u][i] / c2, total++;
        double firm = drv_adam_firm(vsum, total);
        for (int u = 0; u < U; u++)
            for (size_t i = 0; i < m->unit[u].numel; i++)
                if (sqrt(r->v[u][i] / c2) < firm) r->loose[u][i] = 1;
    }
    for (int u = 0; u < U; u++) {
        for (size_t i = 0; i < m->unit[u].numel; i++)
            r->param[u][i] = dtype == L7_BF16 ? bf16_of(r->master[u][i]) : r->master[u][i];
        free(grad[u]);
    }
    L->ref[dtype] = r;
    return r;
}

void l7_reference_free(l7_lab *L) {
    for (int d = 0; d < 2; d++) {
        l7_ref *r = L->ref[d];
        if (!r) continue;
        for (int u = 0; u < L->model.nunits; u++) free(r->master[u]), free(r->m[u]), free(r->v[u]), free(r->param[u]), free(r->loose[u]);
        free(r);
        L->ref[d] = NULL;
    }
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
/* A float32 run against the single-rank run, once AdamW has stepped: the sums over ranks
 * round differently from the serial sum (a relative 2^-24 per element), and AdamW divides
 * each gradient by its own running size, so an element whose gradient is near those
 * roundings moves by a visible part of lr where the reference moved by less. Measured on
 * the solution: 1e-6 typical, 1.4e-5 at worst in about one run of twenty at 8 ranks (a
 * checkpoint resumed at another world size), past the 1e-5 of plain float sums. As in
 * Lab 8, what follows an AdamW update is compared at 1e-4: a wrong reduction, a lost
 * piece or a stale moment is off by far more. */
double l7_adam_tolerance(void) { return fmax(drv_tolerance(), 1e-4); }

/* An element whose gradient is at the rounding level (an Adam RMS under a thousandth of the
 * model's: r->loose) can step either way by up to lr at each step, whatever the others do;
 * it is held to that reach (4 lr a step, a bound on |m/sqrt(v)| lr) and left out of the
 * relative error. Without that, one such element's flip (2 lr against a parameter norm of
 * about 2) fails a correct run outright, at any tolerance a wrong reduction would pass. */
double l7_adam_reach(const l7_lab *L, const l7_ref *ref) { return drv_adam_reach(L->f->lr, ref->steps); }

double l7_bf16_tolerance(const l7_lab *L) {
    gpt_config mg = l7_gpt(L->f, L->f->batch);
    double sq = 0, psi = (double)L->model.numel, f = 3e-3;
    for (int u = 0; u < L->model.nunits; u++) {
        float *p = l7_init_unit(&L->model, &mg, L->seed, u);
        for (size_t i = 0; i < L->model.unit[u].numel; i++) sq += (double)p[i] * p[i];
        free(p);
    }
    return L->f->steps * L->f->lr * (3 * ldexp(1.0, -8) * sqrt(psi) + 2 * sqrt(f * psi)) / sqrt(sq);
}
