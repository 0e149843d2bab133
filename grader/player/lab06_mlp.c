/* lab06_mlp.c (player) - Lab 6's model: the MLP the DDP cases and modes train, the
 * student's layout read out of its state, and what one backward's trace shows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bias.h"
#include "kern_gelu.h"
#include "kern_optim.h"
#include "kern_xent.h"
#include "lab06_mlp.h"

_Static_assert(DDP_MAX_PARAMS == LAB6_MAX_PARAMS, "ddp.h's DDP_MAX_PARAMS and the driver's differ");
_Static_assert((int)DDP_NAIVE == LAB6_NAIVE && (int)DDP_BUCKETED == LAB6_BUCKETED && (int)DDP_OVERLAP == LAB6_OVERLAP,
               "ddp.h's modes and the driver's differ");

/* ==================================================================================== */
/* The model                                                                             */
/* ==================================================================================== */

void mlp_alloc(mlp *m, int in, int hidden, int classes, int max_rows) {
    memset(m, 0, sizeof *m);
    m->in = in, m->hidden = hidden, m->classes = classes, m->max_rows = max_rows;
    m->lr = LAB6_LR, m->momentum = LAB6_MOMENTUM;
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        size_t n = lab6_numel(hidden, i);
        m->p[i] = (ddp_param){.name = LAB6_PNAMES[i], .data = pl_malloc_floats(n), .numel = n};
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

void mlp_load(mlp *m, const float *host) {
    for (int i = 0; i < LAB6_NPARAMS; i++)
        pl_upload(m->p[i].data, host + lab6_offset(m->hidden, i), m->p[i].numel * sizeof(float));
}

/* The modes' weights: U(+-1/sqrt(fan-in)) from the counter RNG, the same on every rank. */
void mlp_init_random(mlp *m, uint64_t seed) {
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        int rows, cols, fan_in;
        lab6_shape(m->hidden, i, &rows, &cols, &fan_in);
        size_t n = m->p[i].numel;
        float *h = malloc(n * sizeof *h), bound = 1.0f / sqrtf((float)fan_in);
        PL_CHECK(h != NULL, "out of host memory");
        pl_rng_fill_host(h, rows, cols, cols, 0, 0, seed, 600 + (uint64_t)i, PL_RNG_UNIFORM, -bound, bound);
        pl_upload(m->p[i].data, h, n * sizeof *h);
        free(h);
    }
}

void mlp_free(mlp *m) {
    for (int i = 0; i < LAB6_NPARAMS; i++) pl_free(m->p[i].data), pl_free(m->grad_own[i]), pl_free(m->mom[i]);
    float *bufs[] = {m->x, m->a1, m->h1, m->a2, m->h2, m->logits, m->probs, m->dlogits, m->losses, m->dh2, m->dh1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_free(bufs[i]);
    pl_free(m->labels);
}

void mlp_reset_grads(mlp *m) {
    for (int i = 0; i < LAB6_NPARAMS; i++) m->p[i].grad = m->grad_own[i];
}

/* One linear layer forward: y[rows, out] = x[rows, in] W^T + b, W stored [out, in]. */
static void linear_fwd(float *y, const float *x, const float *W, const float *b, int rows, int in, int out) {
    pl_gemm(false, true, rows, out, in, 1.0f, x, in, W, in, 0.0f, y, out, NULL);
    kern_bias_forward(y, b, rows, out, NULL);
}

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

/* Gradient i is final: tell the student's DDP, and note where in the trace its call began
 * and ended (what lab6_scan_trace places the all-reduces by). */
static void hook(mlp *m, ddp_state *d, int i) {
    if (!d) return;
    int k = m->nhooks++;
    if (k < LAB6_NPARAMS) m->hook_at[k] = pl_trace_count();
    ddp_grad_ready(d, i);
    if (k < LAB6_NPARAMS) m->hook_end[k] = pl_trace_count();
}

/* Weight then bias gradient of one layer (bias first when the case says so); accumulate
 * adds to what the gradients hold. */
static void linear_bwd_params(mlp *m, ddp_state *d, int w, const float *dy, const float *x, int rows, int in, int out,
                              bool accumulate) {
    ddp_param *W = &m->p[w], *b = &m->p[w + 1];
    bool bias_first = m->bias_first & (1u << (w / 2));
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

void mlp_backward(mlp *m, ddp_state *d, int rows, bool accumulate) {
    int H = m->hidden, C = m->classes;
    m->nhooks = 0;
    pl_region_begin("backward");
    kern_xent_backward(m->dlogits, m->probs, m->labels, rows, C, NULL);
    linear_bwd_params(m, d, P_W3, m->dlogits, m->h2, rows, H, C, accumulate);
    pl_gemm(false, false, rows, H, C, 1.0f, m->dlogits, C, m->p[P_W3].data, H, 0.0f, m->dh2, H, NULL);
    kern_gelu_backward(m->dh2, m->dh2, m->a2, (size_t)rows * H, NULL);
    linear_bwd_params(m, d, P_W2, m->dh2, m->h1, rows, H, H, accumulate);
    pl_gemm(false, false, rows, H, H, 1.0f, m->dh2, H, m->p[P_W2].data, H, 0.0f, m->dh1, H, NULL);
    kern_gelu_backward(m->dh1, m->dh1, m->a1, (size_t)rows * H, NULL);
    linear_bwd_params(m, d, P_W1, m->dh1, m->x, rows, m->in, H, accumulate);
    pl_region_end();
}

void mlp_step(mlp *m) {
    for (int i = 0; i < LAB6_NPARAMS; i++)
        kern_optim_sgd(m->p[i].data, m->mom[i], m->p[i].grad, m->p[i].numel, m->lr, m->momentum, 0.0f, NULL);
}

void mlp_download(const mlp *m, float *host) {
    pl_device_sync();
    for (int i = 0; i < LAB6_NPARAMS; i++)
        pl_download(host + lab6_offset(m->hidden, i), m->p[i].data, m->p[i].numel * sizeof(float));
}

/* ==================================================================================== */
/* What the player reports                                                               */
/* ==================================================================================== */

static int clamp(int v, int hi) { return v < 0 ? 0 : v > hi ? hi : v; }

void lab6_read_layout(const ddp_state *d, const mlp *m, lab6_layout *L) {
    memset(L, 0, sizeof *L);
    L->nbuckets = d->nbuckets;
    int nb = clamp(d->nbuckets, LAB6_MAX_PARAMS);
    for (int b = 0; b < nb; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        L->nparams[b] = bk->nparams;
        L->numel[b] = (int64_t)bk->numel;
        L->has_buf[b] = bk->buf != NULL;
        for (int j = 0; j < clamp(bk->nparams, LAB6_MAX_PARAMS); j++)
            L->params[b][j] = bk->params[j], L->offsets[b][j] = (int64_t)bk->offsets[j];
    }
    /* each gradient against the buffer of the bucket the state puts it in */
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        L->view[i] = LAB6_NOT_A_VIEW;
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < clamp(d->buckets[b].nparams, LAB6_MAX_PARAMS); j++) {
                const ddp_bucket *bk = &d->buckets[b];
                if (bk->params[j] != i || !bk->buf || !m->p[i].grad) continue;
                uintptr_t g = (uintptr_t)m->p[i].grad, s = (uintptr_t)bk->buf;
                if (g >= s && (g - s) % sizeof(float) == 0 && (g - s) / sizeof(float) < bk->numel)
                    L->view[i] = (int64_t)((g - s) / sizeof(float));
            }
    }
}

void lab6_scan_trace(const mlp *m, lab6_step *out) {
    const pl_trace_event *ev = pl_trace_events();
    size_t n = pl_trace_count();
    double b0 = -1, b1 = -1;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == PL_OP_REGION && ev[i].name && !strcmp(ev[i].name, "backward")) b0 = ev[i].t_start, b1 = ev[i].t_end;
    double tot = 0, inside = 0;
    int k = 0, started_inside = 0, hooks = m->nhooks < LAB6_NPARAMS ? m->nhooks : LAB6_NPARAMS;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != PL_OP_ALLREDUCE) continue;
        if (k < LAB6_MAX_AR) {
            int where = AR_BETWEEN;
            if (hooks == 0 || i >= m->hook_end[hooks - 1]) where = AR_IN_END;
            else if (i < m->hook_at[0]) where = AR_IN_BEGIN;
            for (int j = 0; j < hooks; j++)
                if (i >= m->hook_at[j] && i < m->hook_end[j]) where = j;
            out->ar_hook[k] = where;
            out->ar_bytes[k] = (int64_t)ev[i].bytes;
        }
        k++;
        double s = ev[i].t_start, e = ev[i].t_end > s ? ev[i].t_end : s;
        tot += e - s;
        double lo = s > b0 ? s : b0, hi = e < b1 ? e : b1;
        if (hi > lo) inside += hi - lo;
        if (s >= b0 && s <= b1) started_inside++;
    }
    out->nar = k;
    /* inside backward: all-reduces off the comm stream, and compute that waited for one of
     * this backward's all-reduces (`after`: the other stream's op it follows, by index) */
    size_t lo = hooks ? m->hook_at[0] : 0, hi = hooks ? m->hook_end[hooks - 1] : 0;
    for (size_t i = lo; i < hi && i < n; i++) {
        if (ev[i].kind == PL_OP_ALLREDUCE && ev[i].stream != 1) out->ar_off_comm++;
        bool compute = ev[i].kind == PL_OP_GEMM || ev[i].kind == PL_OP_KERNEL;
        if (compute && ev[i].stream == 0 && ev[i].after >= (int64_t)lo && ev[i].after < (int64_t)i &&
            ev[ev[i].after].kind == PL_OP_ALLREDUCE)
            out->compute_waits++;
    }
    out->in_bwd_time = started_inside;
    out->frac = tot > 0 ? inside / tot : 0;
}

/* ==================================================================================== */
/* The cost model                                                                         */
/* ==================================================================================== */

static struct {
    plc_profile prof;
    bool have;
} g_cost;

const plc_profile *lab6_profile(void) { return g_cost.have ? &g_cost.prof : NULL; }

void lab6_player_init(void) {
    char err[300];
    g_cost.have = plc_profile_load(&g_cost.prof, lab6_opts()->profile, err, sizeof err) == 0;
    if (!g_cost.have && strcmp(lab6_opts()->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
}

bool lab6_predict(plc_prediction *pp) {
    char err[200] = "";
    memset(pp, 0, sizeof *pp);
    if (!g_cost.have) return false;
    if (plc_replay_trace(&g_cost.prof, 0, pl_comm_world(), pp, err, sizeof err) == 0) return true;
    static bool said;
    if (!said && pl_rank() == 0) pl_log("cost model: %s", err);
    said = true;
    return false;
}
