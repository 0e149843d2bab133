/* lab04_kit.c - what the kit does for Lab 4: build the stage pp_execute works on (the
 * serial model's layers of this rank, from the counter RNG), and the reference the real
 * runs are judged against: the whole model on one rank, the global batch in one piece
 * (one forward and backward of m*b sequences, not m micro-batches), so that what the
 * pipeline adds (micro-batching, the 1/m scale, accumulation, routing) is what is tested. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_*_init (the initial parameters, on the host)
#include "lab04.h"

/* ==================================================================================== */
/* The stage                                                                              */
/* ==================================================================================== */

int pp_stage_build(pp_stage *st, const pp_config *c, const gpt_config *model, pl_comm *comm, uint64_t seed, float lr) {
    memset(st, 0, sizeof *st);
    int p = c->stages, v = c->chunks;
    if (p < 1 || p > PP_MAX_STAGES || p != pl_comm_size(comm) || c->layers < p) return PP_ERR_STAGES;
    if (c->micro < 1) return PP_ERR_MICRO;
    if (v < 1 || v > PP_MAX_CHUNKS || v * p > c->layers) return PP_ERR_CHUNKS;
    st->cfg = *c;
    st->model = *model;
    st->comm = comm;
    st->stage = pl_comm_rank(comm);
    st->lr = lr;
    for (int k = 0; k < v; k++) {
        pp_chunk *ch = &st->chunk[k];
        ch->count = pp_layers(c, st->stage, k, &ch->first);
        ch->params = calloc((size_t)ch->count, sizeof *ch->params);
        ch->grads = calloc((size_t)ch->count, sizeof *ch->grads);
        PL_CHECK(ch->params && ch->grads, "out of host memory");
        for (int l = 0; l < ch->count; l++) {
            gpt_block_params_alloc(&ch->params[l], model);
            gpt_block_init(&ch->params[l], model, ch->first + l, seed);
            gpt_block_params_alloc(&ch->grads[l], model);
            pl_fill(ch->grads[l].base, 0.0f, ch->grads[l].count, NULL);
        }
    }
    st->has_embed = st->stage == 0;
    st->has_head = st->stage == p - 1;
    if (st->has_embed) {
        gpt_embed_params_alloc(&st->embed, model);
        gpt_embed_init(&st->embed, model, seed);
        gpt_embed_params_alloc(&st->dembed, model);
        pl_fill(st->dembed.base, 0.0f, st->dembed.count, NULL);
    }
    if (st->has_head) {
        gpt_head_params_alloc(&st->head, model);
        gpt_head_init(&st->head, model, seed);
        gpt_head_params_alloc(&st->dhead, model);
        pl_fill(st->dhead.base, 0.0f, st->dhead.count, NULL);
    }
    st->ws = gpt_workspace_alloc(model, (c->recompute ? GPT_WS_RECOMPUTE : 0) | (st->has_head ? GPT_WS_HEAD : 0));
    return PP_OK;
}

void pp_stage_free(pp_stage *st) {
    for (int k = 0; k < st->cfg.chunks; k++) {
        pp_chunk *ch = &st->chunk[k];
        for (int l = 0; l < ch->count; l++) gpt_block_params_free(&ch->params[l]), gpt_block_params_free(&ch->grads[l]);
        free(ch->params), free(ch->grads);
    }
    if (st->has_embed) gpt_embed_params_free(&st->embed), gpt_embed_params_free(&st->dembed);
    if (st->has_head) gpt_head_params_free(&st->head), gpt_head_params_free(&st->dhead);
    gpt_workspace_free(st->ws);
    memset(st, 0, sizeof *st);
}

void make_ids(int *host, int m, const gpt_config *mc, uint64_t seed, uint64_t id) {
    size_t n = (size_t)m * mc->seq * mc->batch;
    for (size_t i = 0; i < n; i++) host[i] = (int)(pl_rng_bits(seed, id, i) % (uint64_t)mc->vocab);
}

/* ==================================================================================== */
/* The serial reference                                                                   */
/* ==================================================================================== */

static float *download(const float *dev, size_t n) {
    float *h = malloc((n + 1) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    pl_download(h, dev, n * sizeof *h);
    return h;
}

/* Micro-batch k's sequence j is sequence k*b + j of the global batch: [m][T, b] -> [T, m b]. */
static int *to_global(const int *micro, int m, int T, int b) {
    int *g = malloc((size_t)m * T * b * sizeof *g);
    PL_CHECK(g != NULL, "out of host memory");
    for (int k = 0; k < m; k++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < b; j++) g[(size_t)t * m * b + (size_t)k * b + j] = micro[((size_t)k * T + t) * b + j];
    return g;
}

void serial_reference(serial_grads *g, const gpt_config *mc, int L, int m, const int *tokens, const int *targets,
                      uint64_t seed) {
    gpt_config cw = *mc;
    cw.batch = mc->batch * m;
    size_t NC = (size_t)cw.seq * cw.batch * cw.hidden, N = (size_t)cw.seq * cw.batch;
    int *tok_h = to_global(tokens, m, mc->seq, mc->batch), *tgt_h = to_global(targets, m, mc->seq, mc->batch);
    int *tok = pl_malloc(N * sizeof(int)), *tgt = pl_malloc(N * sizeof(int));
    pl_upload(tok, tok_h, N * sizeof(int));
    pl_upload(tgt, tgt_h, N * sizeof(int));
    gpt_embed_params e, de;
    gpt_head_params h, dh;
    gpt_block_params *b = calloc((size_t)L, sizeof *b), *db = calloc((size_t)L, sizeof *db);
    gpt_acts **a = calloc((size_t)L, sizeof *a);
    PL_CHECK(b && db && a, "out of host memory");
    gpt_embed_params_alloc(&e, &cw), gpt_embed_init(&e, &cw, seed);
    gpt_embed_params_alloc(&de, &cw), pl_fill(de.base, 0.0f, de.count, NULL);
    gpt_head_params_alloc(&h, &cw), gpt_head_init(&h, &cw, seed);
    gpt_head_params_alloc(&dh, &cw), pl_fill(dh.base, 0.0f, dh.count, NULL);
    for (int l = 0; l < L; l++) {
        gpt_block_params_alloc(&b[l], &cw), gpt_block_init(&b[l], &cw, l, seed);
        gpt_block_params_alloc(&db[l], &cw), pl_fill(db[l].base, 0.0f, db[l].count, NULL);
        a[l] = gpt_acts_alloc(&cw, false);
    }
    gpt_workspace *ws = gpt_workspace_alloc(&cw, GPT_WS_HEAD);
    gpt_head_acts *ha = gpt_head_acts_alloc(&cw);
    float *x = pl_malloc_floats(NC), *dx = pl_malloc_floats(NC), *dy = pl_malloc_floats(NC);
    gpt_embed_forward(&cw, &e, x, tok, NULL);
    for (int l = 0; l < L; l++) gpt_block_forward(&b[l], a[l], x, x, ws, NULL);
    g->loss = gpt_head_forward(&h, ha, x, tgt, ws, NULL);
    gpt_head_backward(&h, &dh, ha, dy, 1.0f, ws, NULL);
    for (int l = L - 1; l >= 0; l--) {
        gpt_block_backward(&b[l], &db[l], a[l], dx, dy, ws, NULL);
        float *t = dx;
        dx = dy, dy = t;
    }
    gpt_embed_backward(&cw, &de, dy, tok, NULL);
    g->block = calloc((size_t)L, sizeof *g->block);
    PL_CHECK(g->block != NULL, "out of host memory");
    for (int l = 0; l < L; l++) g->block[l] = download(db[l].base, db[l].count);
    g->embed = download(de.base, de.count);
    g->head = download(dh.base, dh.count);
    for (int l = 0; l < L; l++) {
        gpt_block_params_free(&b[l]), gpt_block_params_free(&db[l]);
        gpt_acts_free(a[l]);
    }
    free(b), free(db), free(a);
    gpt_embed_params_free(&e), gpt_embed_params_free(&de);
    gpt_head_params_free(&h), gpt_head_params_free(&dh);
    gpt_head_acts_free(ha);
    gpt_workspace_free(ws);
    pl_free(x), pl_free(dx), pl_free(dy), pl_free(tok), pl_free(tgt);
    free(tok_h), free(tgt_h);
}

void serial_free(serial_grads *g, int L) {
    for (int l = 0; l < L && g->block; l++) free(g->block[l]);
    free(g->block), free(g->embed), free(g->head);
    memset(g, 0, sizeof *g);
}

/* ==================================================================================== */
/* Comparing a stage with the reference                                                   */
/* ==================================================================================== */

/* Relative Frobenius error of got against want (NaN: infinite). */
static double rel_err(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = got[i] - want[i];
        num += d * d, den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct {
    double grad, param, worst_err;
    char worst[64];
} errs;

/* One parameter block after the step: the gradient buffer holds -lr g, the parameters
 * p0 - lr g; p0 from the host initialisation (the same bits as the device's). */
static void compare_part(errs *E, const char *name, const float *dev_p, const float *dev_g, const float *p0,
                         const float *g_ref, size_t n, float lr) {
    float *gp = download(dev_g, n), *pp = download(dev_p, n);
    double *want_g = malloc(n * sizeof *want_g), *want_p = malloc(n * sizeof *want_p);
    PL_CHECK(want_g && want_p, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        want_g[i] = -(double)lr * g_ref[i];
        want_p[i] = (double)p0[i] - (double)lr * g_ref[i];
    }
    double eg = rel_err(gp, want_g, n), ep = rel_err(pp, want_p, n), e = eg > ep ? eg : ep;
    if (!(eg <= E->grad)) E->grad = eg;
    if (!(ep <= E->param)) E->param = ep;
    if (!(e <= E->worst_err)) E->worst_err = e, snprintf(E->worst, sizeof E->worst, "%s", name);
    free(gp), free(pp), free(want_g), free(want_p);
}

void compare_stage(const pp_stage *st, const serial_grads *g, uint64_t seed, double *grad_err, double *param_err,
                   char *worst, size_t len) {
    errs E = {0, 0, 0, "nothing"};
    char name[64];
    for (int k = 0; k < st->cfg.chunks; k++) {
        const pp_chunk *ch = &st->chunk[k];
        for (int l = 0; l < ch->count; l++) {
            gpt_block_params p0;
            gpt_host_block_alloc(&p0, &st->model);
            gpt_host_block_init(&p0, &st->model, ch->first + l, seed);
            snprintf(name, sizeof name, "block %d", ch->first + l);
            compare_part(&E, name, ch->params[l].base, ch->grads[l].base, p0.base, g->block[ch->first + l], p0.count, st->lr);
            gpt_host_params_free(p0.base);
        }
    }
    if (st->has_embed) {
        gpt_embed_params p0;
        gpt_host_embed_alloc(&p0, &st->model);
        gpt_host_embed_init(&p0, &st->model, seed);
        compare_part(&E, "embedding", st->embed.base, st->dembed.base, p0.base, g->embed, p0.count, st->lr);
        gpt_host_params_free(p0.base);
    }
    if (st->has_head) {
        gpt_head_params p0;
        gpt_host_head_alloc(&p0, &st->model);
        gpt_host_head_init(&p0, &st->model, seed);
        compare_part(&E, "head", st->head.base, st->dhead.base, p0.base, g->head, p0.count, st->lr);
        gpt_host_params_free(p0.base);
    }
    *grad_err = E.grad;
    *param_err = E.param;
    snprintf(worst, len, "%s", E.worst);
}
