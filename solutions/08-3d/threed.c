/* threed.c - Lab 8: 3D parallelism, the reference solution.
 *
 * The grid by colours of pl_comm_split; the vocabulary-parallel embedding as a lookup in
 * the shard with a row of zeros for the tokens it does not hold; the parallel loss on the
 * host over downloaded logits with three all-reduces of N floats; and the step: the 1F1B
 * list of the kit, sends and receives paired as Megatron pairs them (a forward followed
 * by a backward sends its activation and receives the gradient in one group, and the
 * other way round), then the tied embedding, the data group's reduce-scatter, the norm,
 * the clip, AdamW on the shard and the all-gather.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_embedding.h" // defines: kern_embedding_forward, kern_embedding_backward
#include "kern_layernorm.h" // defines: kern_layernorm_forward, kern_layernorm_backward
#include "kern_optim.h"     // defines: kern_optim_adamw
#include "threed.h"

int td_config_check(const td_config *c, int world) {
    if (c->t < 1 || c->p < 1 || world < 1 || world % (c->t * c->p)) return TD_ERR_WORLD;
    if (c->micro < 1 || c->seq < 1 || c->batch < 1 || c->hidden < 1 || c->heads < 1 || c->ffn < 1 || c->vocab < 1 ||
        c->layers < 1 || c->hidden % c->heads)
        return TD_ERR_BATCH;
    if (c->heads % c->t || c->ffn % c->t) return TD_ERR_HEADS;
    if (c->vocab % c->t) return TD_ERR_VOCAB;
    if (c->p > c->layers) return TD_ERR_LAYERS;
    return TD_OK;
}

/* ==================================================================================== */
/* The grid                                                                               */
/* ==================================================================================== */

int td_grid_build(td_grid *g, int t, int p) {
    int world = pl_world(), rank = pl_rank();
    if (t < 1 || p < 1 || world % (t * p)) return TD_ERR_WORLD;
    int d = world / (t * p);
    td_grid x = {.t = t, .p = p, .d = d, .tp = rank % t, .dp = (rank / t) % d, .pp = rank / (t * d)};
    pl_comm *w = pl_comm_world();
    /* a group's colour is what its members share, its key their rank in it */
    x.tensor = pl_comm_split(w, x.dp + d * x.pp, x.tp);
    x.data = pl_comm_split(w, x.tp + t * x.pp, x.dp);
    x.pipeline = pl_comm_split(w, x.tp + t * x.dp, x.pp);
    bool ends = x.pp == 0 || x.pp == p - 1;
    x.embed = pl_comm_split(w, ends ? x.tp + t * x.dp : -1, x.pp);
    *g = x;
    return TD_OK;
}

void td_grid_free(td_grid *g) {
    pl_comm_free(g->tensor), pl_comm_free(g->data), pl_comm_free(g->pipeline), pl_comm_free(g->embed);
    g->tensor = g->data = g->pipeline = g->embed = NULL;
}

/* ==================================================================================== */
/* The vocabulary-parallel embedding                                                      */
/* ==================================================================================== */

/* Device ids into this rank's shard: a token it holds -> its row, any other -> Vt (the
 * row of zeros after the shard). */
static int *local_ids(const int *tokens, int N, int v0, int Vt) {
    int *h = malloc((size_t)N * sizeof *h), *d = pl_malloc((size_t)N * sizeof *d);
    for (int i = 0; i < N; i++) h[i] = tokens[i] >= v0 && tokens[i] < v0 + Vt ? tokens[i] - v0 : Vt;
    pl_upload(d, h, (size_t)N * sizeof *h);
    free(h);
    return d;
}

void td_embed_forward(float *x, const float *wte, const float *wpe, const int *tokens, int T, int b, int C, int V,
                      pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), r = pl_comm_rank(tensor), Vt = V / t, N = T * b;
    float *table = pl_malloc_floats((size_t)(Vt + 1) * C);
    pl_copy(table, wte, (size_t)Vt * C * sizeof(float), s);
    pl_fill(table + (size_t)Vt * C, 0.0f, (size_t)C, s);
    int *ids = local_ids(tokens, N, r * Vt, Vt);
    /* the positions once: rank 0 adds them, the others add zeros */
    float *zeros = NULL;
    if (r != 0) {
        zeros = pl_malloc_floats((size_t)T * C);
        pl_fill(zeros, 0.0f, (size_t)T * C, s);
    }
    kern_embedding_forward(x, ids, table, r == 0 ? wpe : zeros, T, b, C, 0, s);
    if (t > 1) pl_allreduce(x, x, (size_t)N * C, PL_SUM, tensor, s);
    pl_free(table), pl_free(ids), pl_free(zeros);
}

void td_embed_backward(float *dwte, float *dwpe, const float *dx, const int *tokens, int T, int b, int C, int V,
                       pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), r = pl_comm_rank(tensor), Vt = V / t, N = T * b;
    float *dtable = pl_malloc_floats((size_t)(Vt + 1) * C);
    pl_fill(dtable, 0.0f, (size_t)(Vt + 1) * C, s);
    int *ids = local_ids(tokens, N, r * Vt, Vt);
    kern_embedding_backward(dtable, dwpe, dx, ids, T, b, C, 0, s); /* the zero row collects the rest */
    pl_reduce_local(dwte, dtable, (size_t)Vt * C, PL_SUM, s);
    pl_free(dtable), pl_free(ids);
}

/* ==================================================================================== */
/* The parallel cross-entropy                                                             */
/* ==================================================================================== */

/* h[0 .. n) summed (or maxed) over the tensor group, in place. */
static void reduce_host(float *h, int n, pl_op op, pl_comm *tensor, pl_stream *s) {
    if (pl_comm_size(tensor) == 1) return;
    float *d = pl_malloc_floats((size_t)n);
    pl_upload(d, h, (size_t)n * sizeof *h);
    pl_allreduce(d, d, (size_t)n, op, tensor, s);
    pl_download(h, d, (size_t)n * sizeof *h);
    pl_free(d);
}

void td_xent(float *dlogits, double *losses, const float *logits, const int *targets, int N, int V, float scale,
             pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), Vt = V / t, v0 = pl_comm_rank(tensor) * Vt;
    size_t n = (size_t)N * Vt;
    float *L = malloc(n * sizeof *L), *mx = malloc((size_t)N * sizeof *mx), *tl = malloc((size_t)N * sizeof *tl);
    float *se = malloc((size_t)N * sizeof *se);
    pl_download(L, logits, n * sizeof *L);
    for (int i = 0; i < N; i++) {
        const float *row = L + (size_t)i * Vt;
        mx[i] = row[0];
        for (int j = 1; j < Vt; j++) mx[i] = row[j] > mx[i] ? row[j] : mx[i];
        int k = targets[i] - v0;
        tl[i] = k >= 0 && k < Vt ? row[k] : 0.0f;
    }
    reduce_host(mx, N, PL_MAX, tensor, s);
    for (int i = 0; i < N; i++) {
        double sum = 0;
        for (int j = 0; j < Vt; j++) sum += exp((double)L[(size_t)i * Vt + j] - mx[i]);
        se[i] = (float)sum;
    }
    reduce_host(se, N, PL_SUM, tensor, s);
    reduce_host(tl, N, PL_SUM, tensor, s);
    for (int i = 0; i < N; i++) {
        losses[i] = log((double)se[i]) + mx[i] - tl[i];
        for (int j = 0; j < Vt; j++) {
            float *v = L + (size_t)i * Vt + j;
            double prob = exp((double)*v - mx[i]) / se[i];
            *v = (float)(scale * (prob - (j + v0 == targets[i] ? 1.0 : 0.0)));
        }
    }
    pl_upload(dlogits, L, n * sizeof *L);
    free(L), free(mx), free(tl), free(se);
}

/* ==================================================================================== */
/* The step                                                                               */
/* ==================================================================================== */

typedef struct {
    float *x, *ln, *mean, *rstd, *dlogits; /* the head's record of one micro-batch */
} head_rec;

typedef struct {
    td_stage *st;
    const td_batch *batch;
    int t, p, s, m, N, C, Vt;
    pl_comm *tensor, *pipe;
    float *xbuf, *gbuf, *dxbuf, *logits, *dln; /* [N, C] x 4, [N, Vt] */
    gpt_tp_acts ***rec;                         /* [m][layers]: the micro-batches in flight */
    head_rec *head;                             /* [m]: the last stage's                     */
    bool have_act, have_grad;                   /* received by the last paired exchange     */
    float scale;                                /* of each token's loss gradient            */
    double loss;
} runner;

static size_t NC(const runner *x) { return (size_t)x->N * x->C; }

static void head_forward(runner *x, int i) {
    td_stage *st = x->st;
    head_rec *h = &x->head[i];
    int N = x->N, C = x->C;
    h->x = pl_malloc_floats(NC(x)), h->ln = pl_malloc_floats(NC(x));
    h->mean = pl_malloc_floats((size_t)N), h->rstd = pl_malloc_floats((size_t)N);
    h->dlogits = pl_malloc_floats((size_t)N * x->Vt);
    pl_copy(h->x, x->xbuf, NC(x) * sizeof(float), NULL);
    kern_layernorm_forward(h->ln, h->mean, h->rstd, h->x, st->lnf_w, st->lnf_b, N, C, GPT_LN_EPS, NULL);
    pl_gemm(false, true, N, x->Vt, C, 1.0f, h->ln, C, st->wte, C, 0.0f, x->logits, x->Vt, NULL);
    double *losses = malloc((size_t)N * sizeof *losses);
    const int *targets = x->batch->targets + (size_t)i * N;
    td_xent(h->dlogits, losses, x->logits, targets, N, st->cfg.vocab, x->scale, x->tensor, NULL);
    for (int k = 0; k < N; k++) x->loss += losses[k] / ((double)x->m * N);
    free(losses);
}

/* into gbuf: the gradient of the last block's output */
static void head_backward(runner *x, int i) {
    td_stage *st = x->st;
    head_rec *h = &x->head[i];
    int N = x->N, C = x->C;
    pl_gemm(false, false, N, C, x->Vt, 1.0f, h->dlogits, x->Vt, st->wte, C, 0.0f, x->dln, C, NULL);
    if (x->t > 1) pl_allreduce(x->dln, x->dln, NC(x), PL_SUM, x->tensor, NULL); /* each rank saw its vocabulary only */
    pl_gemm(true, false, x->Vt, C, N, 1.0f, h->dlogits, x->Vt, h->ln, C, 1.0f, st->dwte, C, NULL);
    kern_layernorm_backward(x->gbuf, st->dlnf_w, st->dlnf_b, x->dln, h->x, st->lnf_w, h->mean, h->rstd, N, C, NULL);
    pl_free(h->x), pl_free(h->ln), pl_free(h->mean), pl_free(h->rstd), pl_free(h->dlogits);
}

static void forward(runner *x, int i, const td_action *next) {
    td_stage *st = x->st;
    if (st->first)
        td_embed_forward(x->xbuf, st->wte, st->wpe, x->batch->tokens + (size_t)i * x->N, st->cfg.seq, st->cfg.batch, x->C,
                         st->cfg.vocab, x->tensor, NULL);
    else if (!x->have_act)
        pl_recv(x->xbuf, NC(x), x->s - 1, x->pipe, NULL);
    x->have_act = false;
    x->rec[i] = calloc((size_t)st->nlayers, sizeof *x->rec[i]);
    for (int l = 0; l < st->nlayers; l++) {
        x->rec[i][l] = gpt_tp_acts_alloc(&st->block, x->t);
        gpt_tp_block_forward(&st->blocks[l], x->rec[i][l], x->xbuf, x->xbuf, st->ws, x->tensor, NULL);
    }
    if (st->last) {
        head_forward(x, i);
    } else if (next && next->kind == TD_B) { /* the next action waits for a gradient */
        pl_group_start();
        pl_send(x->xbuf, NC(x), x->s + 1, x->pipe, NULL);
        pl_recv(x->gbuf, NC(x), x->s + 1, x->pipe, NULL);
        pl_group_end();
        x->have_grad = true;
    } else {
        pl_send(x->xbuf, NC(x), x->s + 1, x->pipe, NULL);
    }
}

static void backward(runner *x, int i, const td_action *next) {
    td_stage *st = x->st;
    if (st->last) head_backward(x, i);
    else if (!x->have_grad) pl_recv(x->gbuf, NC(x), x->s + 1, x->pipe, NULL);
    x->have_grad = false;
    for (int l = st->nlayers - 1; l >= 0; l--) {
        gpt_tp_block_backward(&st->blocks[l], &st->dblocks[l], x->rec[i][l], x->dxbuf, x->gbuf, st->ws, x->tensor, NULL);
        gpt_tp_acts_free(x->rec[i][l]);
        float *tmp = x->gbuf;
        x->gbuf = x->dxbuf, x->dxbuf = tmp;
    }
    free(x->rec[i]);
    if (st->first) {
        td_embed_backward(st->dwte, st->dwpe, x->gbuf, x->batch->tokens + (size_t)i * x->N, st->cfg.seq, st->cfg.batch, x->C,
                          st->cfg.vocab, x->tensor, NULL);
    } else if (next && next->kind == TD_F) {
        pl_group_start();
        pl_send(x->gbuf, NC(x), x->s - 1, x->pipe, NULL);
        pl_recv(x->xbuf, NC(x), x->s - 1, x->pipe, NULL);
        pl_group_end();
        x->have_act = true;
    } else {
        pl_send(x->gbuf, NC(x), x->s - 1, x->pipe, NULL);
    }
}

/* Zero the gradients and run the stage's 1F1B list over the m micro-batches; returns the
 * replica's mean loss on the last stage. */
static double run_schedule(td_stage *st, const td_batch *batch, float scale) {
    const td_grid *g = st->grid;
    runner x = {.st = st, .batch = batch, .t = g->t, .p = g->p, .s = g->pp, .m = st->cfg.micro,
                .N = st->cfg.seq * st->cfg.batch, .C = st->cfg.hidden, .Vt = st->cfg.vocab / g->t,
                .tensor = g->tensor, .pipe = g->pipeline, .scale = scale};
    pl_fill(st->grads, 0.0f, st->count, NULL);
    x.xbuf = pl_malloc_floats(NC(&x)), x.gbuf = pl_malloc_floats(NC(&x)), x.dxbuf = pl_malloc_floats(NC(&x));
    x.dln = pl_malloc_floats(NC(&x)), x.logits = pl_malloc_floats((size_t)x.N * x.Vt);
    x.rec = calloc((size_t)x.m, sizeof *x.rec);
    x.head = calloc((size_t)x.m, sizeof *x.head);
    td_action *acts = malloc(2 * (size_t)x.m * sizeof *acts);
    int n = td_schedule_1f1b(x.p, x.s, x.m, acts, 2 * x.m);
    for (int k = 0; k < n; k++) {
        const td_action *next = k + 1 < n ? &acts[k + 1] : NULL;
        if (acts[k].kind == TD_F) forward(&x, acts[k].mb, next);
        else backward(&x, acts[k].mb, next);
    }
    pl_free(x.xbuf), pl_free(x.gbuf), pl_free(x.dxbuf), pl_free(x.dln), pl_free(x.logits);
    free(x.rec), free(x.head), free(acts);
    return x.loss;
}

/* The tied embedding: the first stage's lookup gradient plus the last stage's head's. */
static void sync_tied_embedding(td_stage *st) {
    const td_grid *g = st->grid;
    if (g->p > 1 && g->embed) pl_allreduce(st->dwte, st->dwte, (size_t)(st->cfg.vocab / g->t) * st->cfg.hidden, PL_SUM, g->embed, NULL);
}

/* ZeRO-1: data rank dp owns [dp count/d, (dp+1) count/d) of the gradients, the moments and
 * the update; the replicas' gradients averaged into it. */
static size_t reduce_gradients(td_stage *st, size_t *from) {
    const td_grid *g = st->grid;
    size_t shard = st->count / (size_t)g->d;
    *from = (size_t)g->dp * shard;
    if (g->d > 1) pl_reduce_scatter(st->grads, st->grads + *from, shard, PL_AVG, g->data, NULL);
    return shard;
}

/* The sum of squares of grads[from, from + n), each parameter of the model once. */
static double shard_sum_squares(const td_stage *st, size_t from, size_t n) {
    float *g = malloc((n + 1) * sizeof *g);
    pl_download(g, st->grads + from, n * sizeof *g);
    double sum = 0;
    for (int k = 0; k < st->nseg; k++) {
        const td_segment *sg = &st->seg[k];
        if (sg->kind == TD_TIED_COPY || (sg->kind == TD_REPLICATED && st->grid->tp != 0)) continue;
        size_t a = sg->offset > from ? sg->offset : from, b = sg->offset + sg->count < from + n ? sg->offset + sg->count : from + n;
        for (size_t i = a; i < b; i++) sum += (double)g[i - from] * g[i - from];
    }
    free(g);
    return sum;
}

/* The norm of the whole model's gradient: every rank's share, one all-reduce. */
static double global_norm(const td_stage *st, size_t from, size_t shard) {
    float ss = (float)shard_sum_squares(st, from, shard);
    if (pl_world() > 1) {
        float *d = pl_malloc_floats(1);
        pl_upload(d, &ss, sizeof ss);
        pl_allreduce(d, d, 1, PL_SUM, pl_comm_world(), NULL);
        pl_download(&ss, d, sizeof ss);
        pl_free(d);
    }
    return sqrt((double)ss);
}

static void clip_and_update(td_stage *st, size_t from, size_t shard, double norm) {
    if (norm > st->cfg.max_norm) pl_scale(st->grads + from, (float)(st->cfg.max_norm / (norm + 1e-6)), shard, NULL);
    st->step++;
    kern_optim_adamw(st->params + from, st->adam_m, st->adam_v, st->grads + from, shard, st->cfg.lr, st->cfg.beta1,
                     st->cfg.beta2, st->cfg.eps, st->cfg.weight_decay, st->step, NULL);
}

static void gather_parameters(td_stage *st, size_t from, size_t shard) {
    if (st->grid->d > 1) pl_allgather(st->params + from, st->params, shard, st->grid->data, NULL);
}

int td_train_step(td_stage *st, const td_batch *batch, td_result *result) {
    /* each micro-batch's loss is its mean over N tokens; over m of them, 1/(m N) each */
    float scale = 1.0f / ((float)st->cfg.micro * st->cfg.seq * st->cfg.batch);
    double loss = run_schedule(st, batch, scale);
    sync_tied_embedding(st);
    size_t from, shard = reduce_gradients(st, &from);
    double norm = global_norm(st, from, shard);
    clip_and_update(st, from, shard, norm);
    gather_parameters(st, from, shard);
    result->loss = st->last ? loss : 0.0;
    result->grad_norm = norm;
    return TD_OK;
}
