/* lab04_serial.c (referee) - the reference Lab 4's real runs are judged against: the whole
 * model run serially on one rank on the global batch in one piece (one forward and
 * backward of m*b sequences, not m micro-batches), by the host model of models/gpt_host.h
 * (plain loops, double accumulation: not the kernels the player runs), so that what the
 * pipeline adds (micro-batching, the 1/m scale, accumulation, routing) is what is tested;
 * and a stage's initial parameters in the slots' order. */
#include <stdbool.h>
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

/* The serial run's results: the loss and every parameter's gradient (host). */
typedef struct {
    double loss;
    int L;
    gpt_block_params *db;
    gpt_embed_params de;
    gpt_head_params dh;
} serial_run;

/* The whole model on the global batch, forward and backward, with the case's weights. */
static void serial_run_all(const run_case *st, const int *tokens, const int *targets, uint64_t seed, serial_run *out) {
    gpt_config cw = st->mc;
    cw.batch = st->mc.batch * st->m;
    int L = st->cfg.layers;
    size_t NC = (size_t)cw.seq * cw.batch * cw.hidden;
    int *tok = to_global(tokens, st->m, cw.seq, st->mc.batch), *tgt = to_global(targets, st->m, cw.seq, st->mc.batch);
    gpt_embed_params e;
    gpt_head_params h;
    gpt_block_params *b = xcalloc((size_t)L, sizeof *b);
    gpt_host_acts *a = xcalloc((size_t)L, sizeof *a);
    gpt_host_head_acts ha;
    out->L = L;
    out->db = xcalloc((size_t)L, sizeof *out->db);
    gpt_host_embed_alloc(&e, &cw), gpt_host_embed_init(&e, &cw, seed), gpt_host_embed_alloc(&out->de, &cw);
    gpt_host_head_alloc(&h, &cw), gpt_host_head_init(&h, &cw, seed), gpt_host_head_alloc(&out->dh, &cw);
    for (int l = 0; l < L; l++) {
        gpt_host_block_alloc(&b[l], &cw), gpt_host_block_init(&b[l], &cw, l, seed);
        gpt_host_block_alloc(&out->db[l], &cw);
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
    out->loss = gpt_host_head_forward(&cw, &h, &ha, x, tgt);
    gpt_host_head_backward(&cw, &h, &out->dh, &ha, y, 1.0f); /* y: the gradient flowing back */
    for (int l = L - 1; l >= 0; l--) {
        gpt_host_block_backward(&cw, &b[l], &out->db[l], &a[l], x, y);
        float *t = x;
        x = y, y = t;
    }
    gpt_host_embed_backward(&cw, &out->de, y, tok);
    for (int l = 0; l < L; l++) gpt_host_params_free(b[l].base), gpt_host_acts_free(&a[l]);
    free(b), free(a);
    gpt_host_params_free(e.base), gpt_host_params_free(h.base);
    gpt_host_head_acts_free(&ha);
    free(x), free(y), free(tok), free(tgt);
}

static void serial_run_free(serial_run *g) {
    for (int l = 0; l < g->L; l++) gpt_host_params_free(g->db[l].base);
    free(g->db);
    gpt_host_params_free(g->de.base), gpt_host_params_free(g->dh.base);
}

/* Stage s's gradients in the slots' order (n doubles). */
static double *stage_part(const run_case *st, const serial_run *g, int s, size_t n) {
    double *out = xcalloc(n, sizeof *out);
    size_t at = 0;
    for (int c = 0; c < st->v; c++) {
        int first, count = lab4_layers(st->p, st->v, st->cfg.layers, s, c, &first);
        for (int l = first; l < first + count; l++)
            for (size_t i = 0; i < g->db[l].count; i++) out[at++] = g->db[l].base[i];
    }
    if (s == 0)
        for (size_t i = 0; i < g->de.count; i++) out[at++] = g->de.base[i];
    if (s == st->p - 1)
        for (size_t i = 0; i < g->dh.count; i++) out[at++] = g->dh.base[i];
    PL_CHECK(at == n, "the stage's parameters and the serial model's disagree");
    return out;
}

/* The reference travels in pieces well under a relay's limit. */
#define SHARE_DOUBLES (32u * 1024u)

/* The loss of the global batch and the gradients of this stage's parameters (in the
 * slots' layout). Rank 0's referee runs the serial model once; every referee receives the
 * loss and its own stage's part through the relay (signed: no player can alter it), so
 * the p referees do not each compute the same run. */
void serial_reference(run_case *st, const int *tokens, const int *targets, uint64_t seed) {
    int p = st->p;
    bool root = st->s == 0;
    serial_run g;
    if (root) serial_run_all(st, tokens, targets, seed, &g);
    double *all = xcalloc((size_t)p * SHARE_DOUBLES, sizeof *all), *zero = xcalloc(SHARE_DOUBLES, sizeof *zero);
    double loss = root ? g.loss : 0;
    drv_allgather(&loss, sizeof loss, all);
    st->ref_loss = all[0];
    st->ref_grad = xcalloc(st->nw, sizeof *st->ref_grad);
    for (int r = 0; r < p; r++) {
        size_t n = lab4_stage_floats(&st->mc, &st->cfg, r);
        double *part = root ? stage_part(st, &g, r, n) : NULL;
        for (size_t at = 0; at < n; at += SHARE_DOUBLES) {
            size_t k = n - at < SHARE_DOUBLES ? n - at : SHARE_DOUBLES;
            drv_allgather(root ? part + at : zero, k * sizeof(double), all);
            if (st->s == r) memcpy(st->ref_grad + at, all, k * sizeof(double)); /* rank 0's piece */
        }
        free(part);
    }
    free(all), free(zero);
    if (root) serial_run_free(&g);
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

