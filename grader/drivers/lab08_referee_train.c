/* lab08_referee_train.c - the reference every 3D-parallel run is judged against: the
 * whole GPT on one rank, the global batch in one piece (one forward and backward of
 * d m b sequences: no micro-batches, no replicas), the LM head tied to the token
 * embedding, the global gradient norm over every parameter once, clipping, and AdamW in
 * double precision. Plain host loops (models/gpt_host.h): no device, no communication,
 * no student code. Then the slice of it that each rank holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h" // defines: gpt_host_* (the serial model on the host)
#include "lab08.h"

struct l8_serial {
    td_config c;
    gpt_config mc;               /* the model's shapes (batch set per step)              */
    gpt_embed_params e, de;      /* wte [V, C], wpe [T, C] and their gradients           */
    gpt_head_params h, dh;       /* lnf and lm_w: lm_w is a copy of wte (tied)           */
    gpt_block_params *blk, *dblk;
    double *m, *v;               /* AdamW moments over every parameter                   */
    size_t n;                    /* parameters: embed + blocks + lnf (lm_w is wte)       */
    int step;
};

/* The model's parameters and gradients as one list of (param, grad, count) pieces, in a
 * fixed order: wte, wpe, every block, lnf.w + lnf.b. */
typedef struct {
    float *p, *g;
    size_t n;
} piece;

static int pieces(l8_serial *m, piece *out) {
    int k = 0;
    out[k++] = (piece){m->e.base, m->de.base, m->e.count};
    for (int l = 0; l < m->c.layers; l++) out[k++] = (piece){m->blk[l].base, m->dblk[l].base, m->blk[l].count};
    out[k++] = (piece){m->h.lnf_w, m->dh.lnf_w, 2 * (size_t)m->c.hidden};
    return k;
}

l8_serial *l8_serial_new(const td_config *c, uint64_t seed) {
    l8_serial *m = calloc(1, sizeof *m);
    PL_CHECK(m != NULL, "out of host memory");
    m->c = *c;
    m->mc = (gpt_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn,
                         .vocab = c->vocab, .max_pos = c->seq};
    gpt_host_embed_alloc(&m->e, &m->mc), gpt_host_embed_init(&m->e, &m->mc, seed);
    gpt_host_embed_alloc(&m->de, &m->mc);
    gpt_host_head_alloc(&m->h, &m->mc), gpt_host_head_init(&m->h, &m->mc, seed);
    gpt_host_head_alloc(&m->dh, &m->mc);
    m->blk = calloc((size_t)c->layers, sizeof *m->blk);
    m->dblk = calloc((size_t)c->layers, sizeof *m->dblk);
    PL_CHECK(m->blk && m->dblk, "out of host memory");
    m->n = m->e.count + 2 * (size_t)c->hidden;
    for (int l = 0; l < c->layers; l++) {
        gpt_host_block_alloc(&m->blk[l], &m->mc), gpt_host_block_init(&m->blk[l], &m->mc, l, seed);
        gpt_host_block_alloc(&m->dblk[l], &m->mc);
        m->n += m->blk[l].count;
    }
    m->m = calloc(m->n, sizeof *m->m);
    m->v = calloc(m->n, sizeof *m->v);
    PL_CHECK(m->m && m->v, "out of host memory");
    return m;
}

void l8_serial_free(l8_serial *m) {
    if (!m) return;
    gpt_host_params_free(m->e.base), gpt_host_params_free(m->de.base);
    gpt_host_params_free(m->h.base), gpt_host_params_free(m->dh.base);
    for (int l = 0; l < m->c.layers; l++) gpt_host_params_free(m->blk[l].base), gpt_host_params_free(m->dblk[l].base);
    free(m->blk), free(m->dblk), free(m->m), free(m->v), free(m);
}

void l8_serial_step(l8_serial *m, const int *tokens, const int *targets, int B, double *loss, double *norm) {
    const td_config *c = &m->c;
    gpt_config g = m->mc;
    g.batch = B;
    size_t NC = (size_t)g.seq * B * g.hidden;
    piece pc[TD_MAX_STAGES * 8 + 4];
    int np = pieces(m, pc);
    for (int i = 0; i < np; i++) memset(pc[i].g, 0, pc[i].n * sizeof(float));
    memset(m->dh.base, 0, m->dh.count * sizeof(float));
    memcpy(m->h.lm_w, m->e.wte, (size_t)c->vocab * c->hidden * sizeof(float)); /* tied */
    /* forward */
    float *x = malloc(NC * sizeof *x), *dx = malloc(NC * sizeof *dx), *dy = malloc(NC * sizeof *dy);
    gpt_host_acts *acts = calloc((size_t)c->layers, sizeof *acts);
    PL_CHECK(x && dx && dy && acts, "out of host memory");
    gpt_host_embed_forward(&g, &m->e, x, tokens);
    for (int l = 0; l < c->layers; l++) {
        gpt_host_acts_alloc(&acts[l], &g);
        gpt_host_block_forward(&g, &m->blk[l], &acts[l], x, x);
    }
    gpt_host_head_acts ha;
    gpt_host_head_acts_alloc(&ha, &g);
    *loss = gpt_host_head_forward(&g, &m->h, &ha, x, targets);
    /* backward: the head's lm_w gradient is the tied embedding's second half */
    gpt_host_head_backward(&g, &m->h, &m->dh, &ha, dy, 1.0f);
    for (int l = c->layers - 1; l >= 0; l--) {
        gpt_host_block_backward(&g, &m->blk[l], &m->dblk[l], &acts[l], dx, dy);
        float *t = dx;
        dx = dy, dy = t;
    }
    gpt_host_embed_backward(&g, &m->de, dy, tokens);
    for (size_t i = 0; i < (size_t)c->vocab * c->hidden; i++) m->de.wte[i] += m->dh.lm_w[i];
    /* the global norm, each parameter once; clipping; AdamW */
    double ss = 0;
    for (int i = 0; i < np; i++)
        for (size_t j = 0; j < pc[i].n; j++) ss += (double)pc[i].g[j] * pc[i].g[j];
    *norm = sqrt(ss);
    double clip = *norm > c->max_norm ? c->max_norm / (*norm + 1e-6) : 1.0;
    m->step++;
    double b1 = c->beta1, b2 = c->beta2, c1 = 1 - pow(b1, m->step), c2 = 1 - pow(b2, m->step);
    size_t k = 0;
    for (int i = 0; i < np; i++)
        for (size_t j = 0; j < pc[i].n; j++, k++) {
            double gr = clip * pc[i].g[j], p = pc[i].p[j];
            p -= (double)c->lr * c->weight_decay * p;
            m->m[k] = b1 * m->m[k] + (1 - b1) * gr;
            m->v[k] = b2 * m->v[k] + (1 - b2) * gr * gr;
            p -= (double)c->lr * (m->m[k] / c1) / (sqrt(m->v[k] / c2) + c->eps);
            pc[i].p[j] = (float)p;
        }
    for (int l = 0; l < c->layers; l++) gpt_host_acts_free(&acts[l]);
    gpt_host_head_acts_free(&ha);
    free(acts), free(x), free(dx), free(dy);
}

void l8_serial_slice(const l8_serial *m, const l8_layout *lay, float *flat) {
    const td_config *c = &m->c;
    size_t C = (size_t)c->hidden, Vt = (size_t)c->vocab / (size_t)c->t;
    memset(flat, 0, lay->count * sizeof *flat);
    const float *wte = m->e.wte + (size_t)lay->tp * Vt * C;
    if (lay->first) {
        memcpy(flat + lay->off_wte, wte, Vt * C * sizeof *flat);
        memcpy(flat + lay->off_wpe, m->e.wpe, (size_t)c->seq * C * sizeof *flat);
    }
    for (int l = 0; l < lay->nlayers; l++)
        gpt_tp_block_slice_host(flat + lay->off_blocks + (size_t)l * lay->block_count, &m->blk[lay->first_layer + l],
                                &lay->block, c->t, lay->tp);
    if (lay->last) {
        memcpy(flat + lay->off_lnf, m->h.lnf_w, C * sizeof *flat);
        memcpy(flat + lay->off_lnf + C, m->h.lnf_b, C * sizeof *flat);
        if (c->p > 1) memcpy(flat + lay->off_wte_copy, wte, Vt * C * sizeof *flat);
    }
}

void l8_to_global(int *global, const int *const *replica_ids, int d, int m, int T, int b) {
    int B = d * m * b;
    for (int dp = 0; dp < d; dp++)
        for (int k = 0; k < m; k++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < b; j++)
                    global[(size_t)t * B + (size_t)(dp * m + k) * b + j] = replica_ids[dp][((size_t)k * T + t) * b + j];
}
