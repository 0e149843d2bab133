/* lab04_serial.c (referee) - the reference Lab 4's real runs are judged against: the whole
 * model run serially on one rank on the global batch in one piece (one forward and
 * backward of m*b sequences, not m micro-batches), by the host model of models/gpt_host.h
 * (plain loops, double accumulation: not the kernels the player runs), so that what the
 * pipeline adds (micro-batching, the 1/m scale, accumulation, routing) is what is tested;
 * and a stage's initial parameters in the slots' order. */
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_* (the serial reference)
#include "lab04_ref.h"

/* ==================================================================================== */
/* The serial reference                                                                   */
/* ==================================================================================== */

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

/* Micro-batch k's sequence j is sequence k*b + j of the global batch: [m][T, b] -> [T, m b]. */
static int *to_global(const int *micro, int m, int T, int b) {
    int *g = xcalloc((size_t)m * T * b, sizeof *g);
    for (int k = 0; k < m; k++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < b; j++) g[(size_t)t * m * b + (size_t)k * b + j] = micro[((size_t)k * T + t) * b + j];
    return g;
}

/* The loss of the global batch and the gradients of this stage's parameters (in the
 * slots' layout), from the whole model with the case's weights. */
void serial_reference(run_case *st, const int *tokens, const int *targets, uint64_t seed) {
    gpt_config cw = st->mc;
    cw.batch = st->mc.batch * st->m;
    int L = st->cfg.layers;
    size_t NC = (size_t)cw.seq * cw.batch * cw.hidden;
    int *tok = to_global(tokens, st->m, cw.seq, st->mc.batch), *tgt = to_global(targets, st->m, cw.seq, st->mc.batch);
    gpt_embed_params e, de;
    gpt_head_params h, dh;
    gpt_block_params *b = xcalloc((size_t)L, sizeof *b), *db = xcalloc((size_t)L, sizeof *db);
    gpt_host_acts *a = xcalloc((size_t)L, sizeof *a);
    gpt_host_head_acts ha;
    gpt_host_embed_alloc(&e, &cw), gpt_host_embed_init(&e, &cw, seed), gpt_host_embed_alloc(&de, &cw);
    gpt_host_head_alloc(&h, &cw), gpt_host_head_init(&h, &cw, seed), gpt_host_head_alloc(&dh, &cw);
    for (int l = 0; l < L; l++) {
        gpt_host_block_alloc(&b[l], &cw), gpt_host_block_init(&b[l], &cw, l, seed);
        gpt_host_block_alloc(&db[l], &cw);
        gpt_host_acts_alloc(&a[l], &cw);
    }
    gpt_host_head_acts_alloc(&ha, &cw);
    float *x = xcalloc(NC, sizeof *x), *y = xcalloc(NC, sizeof *y);
    gpt_host_embed_forward(&cw, &e, x, tok);
    for (int l = 0; l < L; l++) {
        gpt_host_block_forward(&cw, &b[l], &a[l], y, x);
        float *t = x;
        x = y, y = t;
    }
    st->ref_loss = gpt_host_head_forward(&cw, &h, &ha, x, tgt);
    gpt_host_head_backward(&cw, &h, &dh, &ha, y, 1.0f); /* y: the gradient flowing back */
    /* the backward as far as this stage's lowest block: nothing below it is this rank's */
    int lowest = L;
    for (int c = 0; c < st->v; c++) {
        int first;
        lab4_layers(st->p, st->v, L, st->s, c, &first);
        if (first < lowest) lowest = first;
    }
    for (int l = L - 1; l >= lowest; l--) {
        gpt_host_block_backward(&cw, &b[l], &db[l], &a[l], x, y);
        float *t = x;
        x = y, y = t;
    }
    if (st->s == 0) gpt_host_embed_backward(&cw, &de, y, tok);
    /* this stage's parts, in the slots' order */
    st->ref_grad = xcalloc(st->nw, sizeof *st->ref_grad);
    size_t at = 0;
    for (int c = 0; c < st->v; c++) {
        int first, n = lab4_layers(st->p, st->v, L, st->s, c, &first);
        for (int l = first; l < first + n; l++)
            for (size_t i = 0; i < db[l].count; i++) st->ref_grad[at++] = db[l].base[i];
    }
    if (st->s == 0)
        for (size_t i = 0; i < de.count; i++) st->ref_grad[at++] = de.base[i];
    if (st->s == st->p - 1)
        for (size_t i = 0; i < dh.count; i++) st->ref_grad[at++] = dh.base[i];
    PL_CHECK(at == st->nw, "the stage's parameters and the serial model's disagree");
    for (int l = 0; l < L; l++) {
        gpt_host_params_free(b[l].base), gpt_host_params_free(db[l].base);
        gpt_host_acts_free(&a[l]);
    }
    free(b), free(db), free(a);
    gpt_host_params_free(e.base), gpt_host_params_free(de.base);
    gpt_host_params_free(h.base), gpt_host_params_free(dh.base);
    gpt_host_head_acts_free(&ha);
    free(x), free(y), free(tok), free(tgt);
}

/* This stage's initial parameters, in the slots' order. */
void stage_weights(const run_case *st, float *w, uint64_t seed) {
    size_t at = 0;
    for (int c = 0; c < st->v; c++) {
        int first, n = lab4_layers(st->p, st->v, st->cfg.layers, st->s, c, &first);
        for (int l = first; l < first + n; l++) {
            gpt_block_params p0;
            gpt_host_block_alloc(&p0, &st->mc);
            gpt_host_block_init(&p0, &st->mc, l, seed);
            memcpy(w + at, p0.base, p0.count * sizeof *w);
            at += p0.count;
            gpt_host_params_free(p0.base);
        }
    }
    if (st->s == 0) {
        gpt_embed_params p0;
        gpt_host_embed_alloc(&p0, &st->mc);
        gpt_host_embed_init(&p0, &st->mc, seed);
        memcpy(w + at, p0.base, p0.count * sizeof *w);
        at += p0.count;
        gpt_host_params_free(p0.base);
    }
    if (st->s == st->p - 1) {
        gpt_head_params p0;
        gpt_host_head_alloc(&p0, &st->mc);
        gpt_host_head_init(&p0, &st->mc, seed);
        memcpy(w + at, p0.base, p0.count * sizeof *w);
        gpt_host_params_free(p0.base);
    }
}

