/* lab06_model.c - Lab 6's model and data helpers: the MLP the DDP cases train (forward,
 * backward reporting every gradient to the student's DDP, SGD + momentum), hashes and
 * errors of its parameters, the rows of each rank's batch, and what one step's trace shows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bias.h"
#include "kern_gelu.h"
#include "kern_optim.h"
#include "kern_xent.h"
#include "lab06.h"

const char *PNAMES[NPARAMS] = {"W1", "b1", "W2", "b2", "W3", "b3"};

/* ==================================================================================== */
/* The model                                                                             */
/* ==================================================================================== */


void mlp_init(mlp *m, int in, int hidden, int classes, int max_rows, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->in = in, m->hidden = hidden, m->classes = classes, m->max_rows = max_rows;
    m->lr = 0.1f, m->momentum = 0.9f;
    int rows[NPARAMS] = {hidden, 1, hidden, 1, classes, 1};
    int cols[NPARAMS] = {in, hidden, hidden, hidden, hidden, classes};
    int fan_in[NPARAMS] = {in, in, hidden, hidden, hidden, hidden};
    for (int i = 0; i < NPARAMS; i++) {
        size_t n = (size_t)rows[i] * cols[i];
        float *h = malloc(n * sizeof *h), bound = 1.0f / sqrtf((float)fan_in[i]);
        PL_CHECK(h != NULL, "out of host memory");
        /* the serial master: every rank builds the same initial weights */
        pl_rng_fill_host(h, rows[i], cols[i], cols[i], 0, 0, seed, 600 + i, PL_RNG_UNIFORM, -bound, bound);
        m->p[i] = (ddp_param){.name = PNAMES[i], .data = pl_malloc_floats(n), .numel = n};
        pl_upload(m->p[i].data, h, n * sizeof *h);
        free(h);
        m->grad_own[i] = m->p[i].grad = pl_malloc_floats(n);
        pl_fill(m->grad_own[i], 0, n, NULL);
        m->mom[i] = pl_malloc_floats(n);
        pl_fill(m->mom[i], 0, n, NULL);
    }
    size_t R = (size_t)max_rows;
    m->x = pl_malloc_floats(R * in);
    m->a1 = pl_malloc_floats(R * hidden), m->h1 = pl_malloc_floats(R * hidden);
    m->a2 = pl_malloc_floats(R * hidden), m->h2 = pl_malloc_floats(R * hidden);
    m->logits = pl_malloc_floats(R * classes), m->probs = pl_malloc_floats(R * classes);
    m->dlogits = pl_malloc_floats(R * classes), m->losses = pl_malloc_floats(R);
    m->dh2 = pl_malloc_floats(R * hidden), m->dh1 = pl_malloc_floats(R * hidden);
    m->labels = pl_malloc(R * sizeof(int));
}

void mlp_free(mlp *m) {
    for (int i = 0; i < NPARAMS; i++) pl_free(m->p[i].data), pl_free(m->grad_own[i]), pl_free(m->mom[i]);
    float *bufs[] = {m->x, m->a1, m->h1, m->a2, m->h2, m->logits, m->probs, m->dlogits, m->losses, m->dh2, m->dh1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_free(bufs[i]);
    pl_free(m->labels);
}

/* After ddp_free: gradients back into the model's own storage. */
void mlp_reset_grads(mlp *m) {
    for (int i = 0; i < NPARAMS; i++) m->p[i].grad = m->grad_own[i];
}

/* One linear layer forward: y[rows, out] = x[rows, in] W^T + b, W stored [out, in]. */
static void linear_fwd(float *y, const float *x, const float *W, const float *b, int rows, int in, int out) {
    pl_gemm(false, true, rows, out, in, 1.0f, x, in, W, in, 0.0f, y, out, NULL);
    kern_bias_forward(y, b, rows, out, NULL);
}

/* Forward over `rows` examples (host x [rows, in], labels [rows]); returns the mean loss. */
double mlp_forward(mlp *m, const float *x, const int *y, int rows) {
    int H = m->hidden;
    pl_upload(m->x, x, (size_t)rows * m->in * sizeof(float));
    pl_upload(m->labels, y, (size_t)rows * sizeof(int));
    linear_fwd(m->a1, m->x, m->p[P_W1].data, m->p[P_B1].data, rows, m->in, H);
    kern_gelu_forward(m->h1, m->a1, (size_t)rows * H, NULL);
    linear_fwd(m->a2, m->h1, m->p[P_W2].data, m->p[P_B2].data, rows, H, H);
    kern_gelu_forward(m->h2, m->a2, (size_t)rows * H, NULL);
    linear_fwd(m->logits, m->h2, m->p[P_W3].data, m->p[P_B3].data, rows, H, m->classes);
    kern_xent_forward(m->losses, m->probs, m->logits, m->labels, rows, m->classes, NULL);
    float host[4096];
    double sum = 0;
    for (int r0 = 0; r0 < rows; r0 += 4096) {
        int n = rows - r0 < 4096 ? rows - r0 : 4096;
        pl_download(host, m->losses + r0, (size_t)n * sizeof(float));
        for (int i = 0; i < n; i++) sum += host[i];
    }
    return sum / rows;
}

static void hook(mlp *m, ddp_state *d, int i) {
    if (d) ddp_grad_ready(d, i);
    (void)m;
}

/* Weight then bias gradient of one layer; accumulate adds to what the gradients hold. */
static void linear_bwd_params(mlp *m, ddp_state *d, int w, const float *dy, const float *x, int rows,
                              int in, int out, bool accumulate, bool bias_first) {
    ddp_param *W = &m->p[w], *b = &m->p[w + 1];
    if (!bias_first) {
        pl_gemm(true, false, out, in, rows, 1.0f, dy, out, x, in, accumulate ? 1.0f : 0.0f, W->grad, in, NULL);
        hook(m, d, w);
    }
    if (!accumulate) pl_fill(b->grad, 0, b->numel, NULL);
    kern_bias_backward(b->grad, dy, rows, out, NULL);
    hook(m, d, w + 1);
    if (bias_first) {
        pl_gemm(true, false, out, in, rows, 1.0f, dy, out, x, in, accumulate ? 1.0f : 0.0f, W->grad, in, NULL);
        hook(m, d, w);
    }
}

/* Backward of the last forward (rows examples), reporting each gradient to d (or NULL). */
void mlp_backward(mlp *m, ddp_state *d, int rows, bool accumulate) {
    int H = m->hidden, C = m->classes;
    pl_region_begin("backward");
    kern_xent_backward(m->dlogits, m->probs, m->labels, rows, C, NULL);
    linear_bwd_params(m, d, P_W3, m->dlogits, m->h2, rows, H, C, accumulate, false);
    pl_gemm(false, false, rows, H, C, 1.0f, m->dlogits, C, m->p[P_W3].data, H, 0.0f, m->dh2, H, NULL);
    kern_gelu_backward(m->dh2, m->dh2, m->a2, (size_t)rows * H, NULL);
    linear_bwd_params(m, d, P_W2, m->dh2, m->h1, rows, H, H, accumulate, m->swap_w2_b2_hooks);
    pl_gemm(false, false, rows, H, H, 1.0f, m->dh2, H, m->p[P_W2].data, H, 0.0f, m->dh1, H, NULL);
    kern_gelu_backward(m->dh1, m->dh1, m->a1, (size_t)rows * H, NULL);
    linear_bwd_params(m, d, P_W1, m->dh1, m->x, rows, m->in, H, accumulate, false);
    pl_region_end();
}

void mlp_step(mlp *m) {
    for (int i = 0; i < NPARAMS; i++)
        kern_optim_sgd(m->p[i].data, m->mom[i], m->p[i].grad, m->p[i].numel, m->lr, m->momentum, 0.0f, NULL);
}

/* The recorded events since `first` replayed on the profile (collective); false when
 * there is no profile or the replay fails (the reason goes to the log once). */
bool predict(size_t first, plc_prediction *pp) {
    char err[200] = "";
    memset(pp, 0, sizeof *pp);
    if (!g_have_prof) return false;
    if (plc_replay_trace(&g_prof, first, g_comm, pp, err, sizeof err) == 0) return true;
    static bool said;
    if (!said && g_me == 0) pl_log("cost model: %s", err);
    said = true;
    return false;
}

/* Rows of the global batch of (step, micro) that rank r holds: contiguous shards of a
 * DistributedSampler epoch (no shuffle across steps needed for a check). */
void batch_rows(int step, int micro, int rank, int world, int *rows, int *first) {
    int local = g_batch / world;
    *rows = local;
    *first = ((step * 4 + micro) * g_batch + rank * local) % (int)(g_data.n - g_batch);
}

void load_rows(int first, float **x, int **y) {
    *x = g_data.x + (size_t)first * g_data.dim;
    *y = g_data.y + first;
}

/* A hash of every parameter's bits, split into doubles that hold it exactly. */
void param_hash(mlp *m, double out[2]) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < NPARAMS; i++) {
        size_t n = m->p[i].numel;
        float *host = malloc(n * sizeof *host);
        pl_download(host, m->p[i].data, n * sizeof *host);
        const unsigned char *b = (const unsigned char *)host;
        for (size_t k = 0; k < n * sizeof *host; k++) h = (h ^ b[k]) * 1099511628211ull;
        free(host);
    }
    out[0] = (double)(h >> 32);
    out[1] = (double)(h & 0xffffffffu);
}

double param_rel_err(mlp *a, mlp *b) {
    double num = 0, den = 0;
    for (int i = 0; i < NPARAMS; i++) {
        size_t n = a->p[i].numel;
        float *ha = malloc(n * 4), *hb = malloc(n * 4);
        pl_download(ha, a->p[i].data, n * 4);
        pl_download(hb, b->p[i].data, n * 4);
        for (size_t k = 0; k < n; k++) {
            double dd = (double)ha[k] - hb[k];
            num += isnan(dd) ? 1e30 : dd * dd;
            den += (double)hb[k] * hb[k];
        }
        free(ha), free(hb);
    }
    return sqrt(num / den);
}

/* Scan the trace of one step: all-reduces in order, their sizes, and how much of their
 * time lies inside the backward region. */
void scan_trace(int *nar, size_t *sizes, int cap, double *in_bwd, double *frac) {
    const pl_trace_event *ev = pl_trace_events();
    size_t n = pl_trace_count();
    double b0 = -1, b1 = -1;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == PL_OP_REGION && ev[i].name && !strcmp(ev[i].name, "backward")) b0 = ev[i].t_start, b1 = ev[i].t_end;
    double tot = 0, inside = 0;
    int k = 0, started_inside = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != PL_OP_ALLREDUCE) continue;
        if (k < cap) sizes[k] = ev[i].bytes;
        k++;
        double s = ev[i].t_start, e = ev[i].t_end > s ? ev[i].t_end : s;
        tot += e - s;
        double lo = s > b0 ? s : b0, hi = e < b1 ? e : b1;
        if (hi > lo) inside += hi - lo;
        if (s >= b0 && s <= b1) started_inside++;
    }
    *nar = k;
    *in_bwd = started_inside;
    *frac = tot > 0 ? inside / tot : 0;
}

