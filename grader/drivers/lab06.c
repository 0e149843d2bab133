/* lab06.c - the driver of Lab 6 (data parallelism with gradient buckets), and its training
 * program (--train).
 *
 * The model is an MLP 784 -> H -> H -> 10 with GELU, biases and softmax cross-entropy,
 * trained with SGD + momentum. Parameters are registered W1, b1, W2, b2, W3, b3; backward
 * reports them ready in the order W3, b3, W2, b2, W1, b1 (each weight gradient is one
 * GEMM, then the bias), which is not reverse registration order: the rebuilt buckets show
 * whether the student followed the observed order.
 *
 * Checks (never trusting what student code prints):
 *   buckets.*   membership, order, offsets and views against the bucketing rule
 *   equal.*     after k steps every rank's parameters are bit-identical, and within 1e-5
 *               (relative Frobenius) of single-rank training on the same global batch
 *   calls.*     all-reduce calls per step = parameters (naive) or buckets; nothing else
 *   order.*     the all-reduces of a step run in bucket order (sizes, from the trace)
 *   overlap.*   every bucket's all-reduce starts while backward is still running; the
 *               fraction of all-reduce time inside backward is reported
 *   nosync      no collective during no_sync micro-steps; the synced step matches
 *   rebuild     after the first iteration: buckets in rank 0's observed order, every rank
 * The data is synthetic (datasets/ds_fashion.h, counter RNG): grading never needs the
 * Fashion-MNIST package.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"
#include "driver.h"
#include "ds_fashion.h"
#include "kern_bias.h"
#include "kern_gelu.h"
#include "kern_optim.h"
#include "kern_xent.h"
#include "pl_costmodel.h" // defines: plc_profile, plc_replay_trace (the predicted overlap)

enum { P_W1, P_B1, P_W2, P_B2, P_W3, P_B3, NPARAMS };
static const char *PNAMES[NPARAMS] = {"W1", "b1", "W2", "b2", "W3", "b3"};

/* ==================================================================================== */
/* The model                                                                             */
/* ==================================================================================== */

typedef struct {
    int in, hidden, classes, max_rows;
    ddp_param p[NPARAMS];
    float *grad_own[NPARAMS]; /* the model's gradient storage (DDP may point elsewhere) */
    float *mom[NPARAMS];
    float *x, *a1, *h1, *a2, *h2, *logits, *probs, *losses, *dlogits, *dh2, *dh1;
    int *labels;
    float lr, momentum;
    int swap_w2_b2_hooks; /* the rebuild case: this rank reports b2 before W2 */
} mlp;

static void mlp_init(mlp *m, int in, int hidden, int classes, int max_rows, uint64_t seed) {
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

static void mlp_free(mlp *m) {
    for (int i = 0; i < NPARAMS; i++) pl_free(m->p[i].data), pl_free(m->grad_own[i]), pl_free(m->mom[i]);
    float *bufs[] = {m->x, m->a1, m->h1, m->a2, m->h2, m->logits, m->probs, m->dlogits, m->losses, m->dh2, m->dh1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_free(bufs[i]);
    pl_free(m->labels);
}

/* After ddp_free: gradients back into the model's own storage. */
static void mlp_reset_grads(mlp *m) {
    for (int i = 0; i < NPARAMS; i++) m->p[i].grad = m->grad_own[i];
}

/* One linear layer forward: y[rows, out] = x[rows, in] W^T + b, W stored [out, in]. */
static void linear_fwd(float *y, const float *x, const float *W, const float *b, int rows, int in, int out) {
    pl_gemm(false, true, rows, out, in, 1.0f, x, in, W, in, 0.0f, y, out, NULL);
    kern_bias_forward(y, b, rows, out, NULL);
}

/* Forward over `rows` examples (host x [rows, in], labels [rows]); returns the mean loss. */
static double mlp_forward(mlp *m, const float *x, const int *y, int rows) {
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
static void mlp_backward(mlp *m, ddp_state *d, int rows, bool accumulate) {
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

static void mlp_step(mlp *m) {
    for (int i = 0; i < NPARAMS; i++)
        kern_optim_sgd(m->p[i].data, m->mom[i], m->p[i].grad, m->p[i].numel, m->lr, m->momentum, 0.0f, NULL);
}

/* ==================================================================================== */
/* Grading cases                                                                          */
/* ==================================================================================== */

static int g_n, g_me, g_hidden = 64, g_batch = 48, g_steps = 4;
static uint64_t g_seed;
static ds_dataset g_data;
static pl_comm *g_comm;
static plc_profile g_prof; /* --profile (default dgx-h100): predictions of the recorded steps */
static bool g_have_prof;

/* The recorded events since `first` replayed on the profile (collective); false when
 * there is no profile or the replay fails (the reason goes to the log once). */
static bool predict(size_t first, plc_prediction *pp) {
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
static void batch_rows(int step, int micro, int rank, int world, int *rows, int *first) {
    int local = g_batch / world;
    *rows = local;
    *first = ((step * 4 + micro) * g_batch + rank * local) % (int)(g_data.n - g_batch);
}

static void load_rows(int first, float **x, int **y) {
    *x = g_data.x + (size_t)first * g_data.dim;
    *y = g_data.y + first;
}

/* A hash of every parameter's bits, split into doubles that hold it exactly. */
static void param_hash(mlp *m, double out[2]) {
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

static double param_rel_err(mlp *a, mlp *b) {
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

/* Expected layout for an order and caps, in the rule's words. */
typedef struct {
    int nbuckets, nparams[DDP_MAX_PARAMS], params[DDP_MAX_PARAMS][DDP_MAX_PARAMS];
} layout;

static layout expected_layout(mlp *m, const int *order, double cap_mb, double first_mb) {
    layout L;
    memset(&L, 0, sizeof L);
    size_t bytes = 0;
    for (int k = 0; k < NPARAMS; k++) {
        double cap = (L.nbuckets == 1 ? first_mb : cap_mb) * 1048576.0;
        if (L.nbuckets == 0 || (double)bytes >= cap) L.nbuckets++, bytes = 0;
        int b = L.nbuckets - 1;
        L.params[b][L.nparams[b]++] = order[k];
        bytes += m->p[order[k]].numel * sizeof(float);
    }
    return L;
}

/* Does the student's state hold layout L with gradient views? Writes a reason if not. */
static bool check_layout(const ddp_state *d, const mlp *m, const layout *L, char *why, size_t n) {
    if (d->nbuckets != L->nbuckets) {
        snprintf(why, n, "%d bucket(s), expected %d", d->nbuckets, L->nbuckets);
        return false;
    }
    for (int b = 0; b < L->nbuckets; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        if (bk->nparams != L->nparams[b]) {
            snprintf(why, n, "bucket %d holds %d parameter(s), expected %d", b, bk->nparams, L->nparams[b]);
            return false;
        }
        size_t off = 0;
        for (int j = 0; j < bk->nparams; j++) {
            int i = L->params[b][j];
            if (bk->params[j] != i) {
                snprintf(why, n, "bucket %d position %d is %s, expected %s", b, j,
                         bk->params[j] >= 0 && bk->params[j] < NPARAMS ? PNAMES[bk->params[j]] : "?", PNAMES[i]);
                return false;
            }
            if (bk->offsets[j] != off) {
                snprintf(why, n, "bucket %d: %s at offset %zu, expected %zu", b, PNAMES[i], bk->offsets[j], off);
                return false;
            }
            if (!bk->buf || m->p[i].grad != bk->buf + off) {
                snprintf(why, n, "%s's gradient is not a view of bucket %d at offset %zu", PNAMES[i], b, off);
                return false;
            }
            off += m->p[i].numel;
        }
        if (bk->numel != off) {
            snprintf(why, n, "bucket %d has %zu elements, its parameters %zu", b, bk->numel, off);
            return false;
        }
    }
    return true;
}

static const int REVERSE[NPARAMS] = {P_B3, P_W3, P_B2, P_W2, P_B1, P_W1};
static const int OBSERVED[NPARAMS] = {P_W3, P_B3, P_W2, P_B2, P_W1, P_B1};

typedef struct {
    const char *name;
    double cap, first; /* MiB */
} caps;
static const caps CAPS_DEFAULT = {"default", 0, 0}, CAPS_TWO = {"two", 25, 0.01},
                  CAPS_MID = {"three", 0.015, 0.001}, CAPS_MANY = {"many", 1e-6, 1e-6};

static void case_buckets(const caps *c) {
    char name[64], why[256] = "";
    snprintf(name, sizeof name, "buckets.%s", c->name);
    if (!drv_case_begin(name)) return;
    mlp m;
    mlp_init(&m, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, DDP_BUCKETED, c->cap, c->first, g_comm);
    layout L = expected_layout(&m, REVERSE, c->cap > 0 ? c->cap : 25, c->first > 0 ? c->first : 1);
    bool ok = check_layout(&d, &m, &L, why, sizeof why);
    double bad = drv_sum(ok ? 0 : 1);
    drv_result *r = drv_result_new(name, "buckets");
    drv_result_num(r, "buckets", d.nbuckets);
    drv_result_num(r, "expected_buckets", L.nbuckets);
    drv_result_emit(r, bad ? "wrong" : "pass", bad ? (why[0] ? why : "another rank's layout is wrong") : NULL);
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
}

/* Per-step observations of one DDP training run. */
typedef struct {
    bool ran;
    double rel_err, hash_mismatch;
    double calls_per_step[8], other_colls[8];
    double launched_in_bwd[8], overlap_frac[8];
    double pred_overlap[8], pred_bwd_us[8]; /* the profile's replay of the backward */
    int nbuckets_step[8];
    char order_why[256];
    bool order_ok;
} run_stats;

/* Scan the trace of one step: all-reduces in order, their sizes, and how much of their
 * time lies inside the backward region. */
static void scan_trace(int *nar, size_t *sizes, int cap, double *in_bwd, double *frac) {
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

static void train_ddp(ddp_mode mode, const caps *c, run_stats *st) {
    memset(st, 0, sizeof *st);
    st->ran = true;
    st->order_ok = true;
    mlp m, ref;
    int local = g_batch / g_n;
    mlp_init(&m, g_data.dim, g_hidden, g_data.classes, local, g_seed);
    mlp_init(&ref, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, mode, c->cap, c->first, g_comm);
    for (int step = 0; step < g_steps; step++) {
        int rows, first;
        float *x;
        int *y;
        batch_rows(step, 0, g_me, g_n, &rows, &first);
        load_rows(first, &x, &y);
        mlp_forward(&m, x, y, rows);
        pl_device_sync();
        ddp_backward_begin(&d);
        pl_device_sync();
        pl_metrics_reset();
        pl_trace_clear();
        mlp_backward(&m, &d, rows, false);
        ddp_backward_end(&d);
        pl_device_sync();
        pl_metrics m_;
        pl_metrics_get(&m_);
        int s = step < 8 ? step : 7, nar;
        size_t sizes[DDP_MAX_PARAMS * 2];
        scan_trace(&nar, sizes, DDP_MAX_PARAMS * 2, &st->launched_in_bwd[s], &st->overlap_frac[s]);
        plc_prediction pp;
        if (predict(0, &pp)) st->pred_overlap[s] = pp.comm_overlap, st->pred_bwd_us[s] = pp.step_time * 1e6;
        st->calls_per_step[s] = (double)m_.coll_calls[PL_OP_ALLREDUCE];
        st->other_colls[s] = (double)m_.coll_total - (double)m_.coll_calls[PL_OP_ALLREDUCE];
        st->nbuckets_step[s] = mode == DDP_NAIVE ? NPARAMS : d.nbuckets;
        /* in bucket order: the k-th all-reduce has the k-th bucket's size */
        if (mode != DDP_NAIVE && st->order_ok) {
            for (int k = 0; k < nar && k < d.nbuckets; k++)
                if (sizes[k] != d.buckets[k].numel * sizeof(float)) {
                    snprintf(st->order_why, sizeof st->order_why,
                             "step %d: all-reduce %d moved %zu bytes, bucket %d holds %zu", step, k, sizes[k], k,
                             d.buckets[k].numel * sizeof(float));
                    st->order_ok = false;
                    break;
                }
        }
        mlp_step(&m);
        /* the single-rank reference on the same global batch */
        batch_rows(step, 0, 0, 1, &rows, &first);
        load_rows(first, &x, &y);
        mlp_forward(&ref, x, y, rows);
        mlp_backward(&ref, NULL, rows, false);
        mlp_step(&ref);
    }
    pl_device_sync();
    double h[2];
    param_hash(&m, h);
    st->hash_mismatch = (drv_max(h[0]) != drv_min(h[0])) || (drv_max(h[1]) != drv_min(h[1]));
    st->rel_err = drv_max(param_rel_err(&m, &ref));
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    mlp_free(&ref);
}

static const char *MODE_NAMES[] = {"naive", "bucketed", "overlap"};

static void cases_mode(ddp_mode mode) {
    run_stats st;
    memset(&st, 0, sizeof st);
    /* overlap: one bucket per parameter, so backward fills a later bucket (W3) before an
     * earlier one (b3) and launch order matters */
    const caps *c = mode == DDP_NAIVE ? &CAPS_DEFAULT : mode == DDP_OVERLAP ? &CAPS_MANY : &CAPS_MID;
    char name[64], msg[300];
    const char *mn = MODE_NAMES[mode];

    snprintf(name, sizeof name, "equal.%s", mn);
    if (drv_case_begin(name)) {
        if (!st.ran) train_ddp(mode, c, &st);
        drv_result *r = drv_result_new(name, mn);
        drv_result_num(r, "rel_err", st.rel_err);
        drv_result_num(r, "ranks_differ", st.hash_mismatch);
        const char *v = "pass";
        msg[0] = 0;
        if (st.hash_mismatch) v = "wrong", snprintf(msg, sizeof msg, "parameters differ between ranks after %d steps", g_steps);
        else if (!(st.rel_err <= 1e-5))
            v = "wrong", snprintf(msg, sizeof msg, "parameters after %d steps differ from single-rank training: rel err %.3g > 1e-5",
                                  g_steps, st.rel_err);
        drv_result_emit(r, v, msg[0] ? msg : NULL);
    }
    snprintf(name, sizeof name, "calls.%s", mn);
    if (drv_case_begin(name)) {
        if (!st.ran) train_ddp(mode, c, &st);
        int s = g_steps - 1 < 7 ? g_steps - 1 : 7;
        double calls = drv_max(st.calls_per_step[s]), callsmin = drv_min(st.calls_per_step[s]);
        double other = drv_max(st.other_colls[s]);
        int want = st.nbuckets_step[s];
        drv_result *r = drv_result_new(name, mn);
        drv_result_num(r, "allreduce_calls", calls);
        drv_result_num(r, "expected_calls", want);
        const char *v = "pass";
        msg[0] = 0;
        if (calls != want || callsmin != want)
            v = "wrong", snprintf(msg, sizeof msg, "%.0f all-reduce call(s) in a steady step, expected %d (%s)", calls, want,
                                  mode == DDP_NAIVE ? "one per parameter" : "one per bucket");
        else if (other > 0)
            v = "wrong", snprintf(msg, sizeof msg, "%.0f other collective(s) in a steady step, expected none", other);
        drv_result_emit(r, v, msg[0] ? msg : NULL);
    }
    if (mode == DDP_NAIVE) return;
    snprintf(name, sizeof name, "order.%s", mn);
    if (drv_case_begin(name)) {
        if (!st.ran) train_ddp(mode, c, &st);
        double bad = drv_sum(st.order_ok ? 0 : 1);
        drv_result *r = drv_result_new(name, mn);
        drv_result_emit(r, bad ? "wrong" : "pass", bad ? (st.order_why[0] ? st.order_why : "another rank launched out of bucket order") : NULL);
    }
    if (mode != DDP_OVERLAP) return;
    snprintf(name, sizeof name, "overlap.%s", mn);
    if (drv_case_begin(name)) {
        if (!st.ran) train_ddp(mode, c, &st);
        int s = g_steps - 1 < 7 ? g_steps - 1 : 7;
        double inside = drv_min(st.launched_in_bwd[s]), frac = drv_sum(st.overlap_frac[s]) / g_n;
        double f0 = drv_sum(st.overlap_frac[0]) / g_n;
        int want = st.nbuckets_step[s];
        drv_result *r = drv_result_new(name, mn);
        drv_result_num(r, "launched_in_backward", inside);
        drv_result_num(r, "buckets", want);
        drv_result_num(r, "overlap_fraction", frac);
        drv_result_num(r, "overlap_fraction_step0", f0);
        const char *v = "pass";
        msg[0] = 0;
        if (g_have_prof && g_n > 1) {
            drv_result_num(r, "pred_overlap", st.pred_overlap[s]);
            drv_result_num(r, "pred_backward_us", st.pred_bwd_us[s]);
            snprintf(msg, sizeof msg, "all-reduce time inside backward: %.0f%% measured; %s predicts %.0f%% hidden behind compute, backward %.1f us",
                     100 * frac, g_prof.name, 100 * st.pred_overlap[s], st.pred_bwd_us[s]);
        }
        if (inside < want)
            v = "wrong", snprintf(msg, sizeof msg, "only %.0f of %d bucket all-reduces started while backward was running", inside, want);
        drv_result_emit(r, v, msg[0] ? msg : NULL);
    }
}

/* no_sync: micro-steps 0 and 1 accumulate locally, micro-step 2 synchronises. */
static void case_nosync(void) {
    if (!drv_case_begin("nosync")) return;
    const int micro = 3, steps = 2;
    mlp m, ref;
    int local = g_batch / g_n;
    mlp_init(&m, g_data.dim, g_hidden, g_data.classes, local, g_seed);
    mlp_init(&ref, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, DDP_OVERLAP, CAPS_MID.cap, CAPS_MID.first, g_comm);
    double colls_nosync = 0, calls_sync = 0;
    int want_sync = 0;
    for (int step = 0; step < steps; step++) {
        for (int k = 0; k < micro; k++) {
            int rows, first;
            float *x;
            int *y;
            bool sync = k == micro - 1;
            ddp_set_sync(&d, sync);
            batch_rows(step, k, g_me, g_n, &rows, &first);
            load_rows(first, &x, &y);
            mlp_forward(&m, x, y, rows);
            pl_device_sync();
            ddp_backward_begin(&d);
            pl_device_sync();
            pl_metrics_reset();
            mlp_backward(&m, &d, rows, k > 0);
            ddp_backward_end(&d);
            pl_device_sync();
            pl_metrics mm;
            pl_metrics_get(&mm);
            if (sync) calls_sync = (double)mm.coll_calls[PL_OP_ALLREDUCE], want_sync = d.nbuckets;
            else colls_nosync += (double)mm.coll_total + (double)mm.msgs_sent;
            batch_rows(step, k, 0, 1, &rows, &first);
            load_rows(first, &x, &y);
            mlp_forward(&ref, x, y, rows);
            mlp_backward(&ref, NULL, rows, k > 0);
        }
        mlp_step(&m);
        mlp_step(&ref);
    }
    pl_device_sync();
    double h[2];
    param_hash(&m, h);
    double mismatch = (drv_max(h[0]) != drv_min(h[0])) || (drv_max(h[1]) != drv_min(h[1]));
    double err = drv_max(param_rel_err(&m, &ref));
    colls_nosync = drv_max(colls_nosync);
    double cs = drv_max(calls_sync);
    drv_result *r = drv_result_new("nosync", "nosync");
    drv_result_num(r, "collectives_in_no_sync", colls_nosync);
    drv_result_num(r, "allreduce_calls_synced", cs);
    drv_result_num(r, "rel_err", err);
    char msg[256] = "";
    const char *v = "pass";
    if (colls_nosync > 0) v = "wrong", snprintf(msg, sizeof msg, "%.0f collective(s)/message(s) during no_sync micro-steps, expected 0", colls_nosync);
    else if (cs != want_sync) v = "wrong", snprintf(msg, sizeof msg, "%.0f all-reduce(s) in the synced micro-step, expected %d (one per bucket)", cs, want_sync);
    else if (mismatch) v = "wrong", snprintf(msg, sizeof msg, "parameters differ between ranks after accumulation");
    else if (!(err <= 1e-5)) v = "wrong", snprintf(msg, sizeof msg, "accumulated training differs from single-rank: rel err %.3g > 1e-5", err);
    drv_result_emit(r, v, msg[0] ? msg : NULL);
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    mlp_free(&ref);
}

/* Rebuild: ranks other than 0 report b2 before W2 in the first iteration; after it every
 * rank must hold the layout of rank 0's observed order. */
static void case_rebuild(const caps *c) {
    char name[64];
    snprintf(name, sizeof name, "rebuild.%s", c->name);
    if (!drv_case_begin(name)) return;
    mlp m;
    int local = g_batch / g_n;
    mlp_init(&m, g_data.dim, g_hidden, g_data.classes, local, g_seed);
    m.swap_w2_b2_hooks = g_me != 0;
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, DDP_OVERLAP, c->cap, c->first, g_comm);
    int rows, first;
    float *x;
    int *y;
    batch_rows(0, 0, g_me, g_n, &rows, &first);
    load_rows(first, &x, &y);
    mlp_forward(&m, x, y, rows);
    ddp_backward_begin(&d);
    mlp_backward(&m, &d, rows, false);
    ddp_backward_end(&d);
    mlp_step(&m);
    pl_device_sync();
    m.swap_w2_b2_hooks = 0;
    ddp_backward_begin(&d); /* the rebuild happens here */
    pl_device_sync();
    layout L = expected_layout(&m, OBSERVED, c->cap, c->first);
    char why[256] = "";
    bool ok = check_layout(&d, &m, &L, why, sizeof why);
    double bad = drv_sum(ok ? 0 : 1);
    double first_bad = drv_min(ok ? 1e9 : g_me);
    drv_result *r = drv_result_new(name, "rebuild");
    drv_result_num(r, "buckets", d.nbuckets);
    char msg[320];
    snprintf(msg, sizeof msg, "after iteration 1, rank %.0f: %s (expected rank 0's order W3 b3 W2 b2 W1 b1)", first_bad,
             why[0] ? why : "layout differs");
    drv_result_emit(r, bad ? "wrong" : "pass", bad ? msg : NULL);
    /* finish the iteration so every rank leaves the same collectives behind */
    mlp_backward(&m, &d, rows, false);
    if (bad) ddp_set_sync(&d, false);
    ddp_backward_end(&d);
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
}

/* ==================================================================================== */
/* Benchmark (--bench) and training (--train)                                            */
/* ==================================================================================== */

static void bench(int iters) {
    for (int mode = 0; mode < 3; mode++) {
        mlp m;
        int local = g_batch / g_n;
        mlp_init(&m, g_data.dim, g_hidden, g_data.classes, local, g_seed);
        ddp_state d;
        ddp_init(&d, m.p, NPARAMS, (ddp_mode)mode, mode == DDP_NAIVE ? 0 : CAPS_MID.cap, mode == DDP_NAIVE ? 0 : CAPS_MID.first, g_comm);
        double t_sum = 0, calls = 0, frac = 0, pred_us = 0, pred_ov = 0;
        int measured = 0;
        for (int it = 0; it < iters + 2; it++) {
            int rows, first;
            float *x;
            int *y;
            batch_rows(it, 0, g_me, g_n, &rows, &first);
            load_rows(first, &x, &y);
            pl_barrier(g_comm);
            pl_metrics_reset();
            pl_trace_clear();
            double t0 = pl_now();
            mlp_forward(&m, x, y, rows);
            ddp_backward_begin(&d);
            mlp_backward(&m, &d, rows, false);
            ddp_backward_end(&d);
            mlp_step(&m);
            pl_device_sync();
            double t = pl_now() - t0;
            if (it < 2) continue; /* warm-up and the rebuild */
            pl_metrics mm;
            pl_metrics_get(&mm);
            int nar;
            size_t sizes[32];
            double inb, f;
            scan_trace(&nar, sizes, 32, &inb, &f);
            plc_prediction pp;
            if (predict(0, &pp)) pred_us += pp.step_time * 1e6, pred_ov += pp.comm_overlap;
            t_sum += drv_max(t), calls += (double)mm.coll_calls[PL_OP_ALLREDUCE], frac += f, measured++;
        }
        frac = drv_sum(frac / measured) / g_n;
        drv_print("bench06 np %d mode %-8s step_ms %8.3f allreduce_per_step %5.1f overlap_fraction %.3f "
                  "pred_step_us %.2f pred_overlap %.3f profile %s\n", g_n, MODE_NAMES[mode], 1e3 * t_sum / measured,
                  calls / measured, frac, pred_us / measured, pred_ov / measured, g_have_prof ? g_prof.name : "-");
        ddp_free(&d);
        mlp_reset_grads(&m);
        mlp_free(&m);
    }
}

static void train(int epochs, const char *csv_path, int hidden, int batch, double lr) {
    char err[512];
    ds_dataset tr, te;
    const char *dir = ds_fashion_dir();
    if (ds_fashion_load(dir, "train", &tr, err, sizeof err) != 0) pl_usage_error("%s", err);
    if (ds_fashion_load(dir, "t10k", &te, err, sizeof err) != 0) pl_usage_error("%s", err);
    if (batch % g_n) pl_usage_error("--batch %d is not a multiple of the world size %d", batch, g_n);
    int local = batch / g_n;
    mlp m;
    mlp_init(&m, tr.dim, hidden, tr.classes, local > 1000 ? local : 1000, g_seed);
    m.lr = (float)lr;
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, DDP_OVERLAP, 0, 0, g_comm);
    ds_sampler s;
    ds_sampler_init(&s, tr.n, g_n, g_me, g_seed, true, false);
    size_t *idx = malloc(s.num_samples * sizeof *idx);
    float *xb = malloc((size_t)local * tr.dim * sizeof(float));
    int *yb = malloc((size_t)local * sizeof(int));
    FILE *csv = NULL;
    if (g_me == 0 && csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) pl_usage_error("--csv: cannot write %s", csv_path);
    }
    size_t steps = s.num_samples / (size_t)local;
    for (int ep = 0; ep < epochs; ep++) {
        ds_sampler_indices(&s, (uint64_t)ep, idx);
        double t0 = pl_now(), loss_sum = 0, step_time = 0;
        for (size_t st = 0; st < steps; st++) {
            for (int r = 0; r < local; r++) {
                size_t e = idx[st * local + r];
                memcpy(xb + (size_t)r * tr.dim, tr.x + e * tr.dim, tr.dim * sizeof(float));
                yb[r] = tr.y[e];
            }
            double ts = pl_now();
            loss_sum += mlp_forward(&m, xb, yb, local);
            ddp_backward_begin(&d);
            mlp_backward(&m, &d, local, false);
            ddp_backward_end(&d);
            mlp_step(&m);
            step_time += pl_now() - ts;
            if (g_me == 0 && (st % 20 == 0 || st + 1 == steps)) {
                int w = 30, filled = (int)((st + 1) * w / steps);
                double el = pl_now() - t0;
                fprintf(stderr, "\repoch %d/%d [%.*s%*s] %3d%% loss %.4f %7.0f img/s", ep + 1, epochs, filled,
                        "##############################", w - filled, "", (int)(100 * (st + 1) / steps),
                        loss_sum / (st + 1), (st + 1) * (double)batch / el);
            }
        }
        pl_device_sync();
        double el = pl_now() - t0;
        /* test accuracy: each rank scores a slice of the test set */
        size_t per = (te.n + g_n - 1) / g_n, lo = per * g_me, hi = lo + per < te.n ? lo + per : te.n;
        double correct = 0;
        float *logits = malloc(1000 * 10 * sizeof(float));
        for (size_t a = lo; a < hi; a += 1000) {
            int rows = (int)(hi - a < 1000 ? hi - a : 1000);
            mlp_forward(&m, te.x + a * te.dim, te.y + a, rows);
            pl_download(logits, m.logits, (size_t)rows * 10 * sizeof(float));
            for (int r = 0; r < rows; r++) {
                int best = 0;
                for (int c = 1; c < 10; c++)
                    if (logits[r * 10 + c] > logits[r * 10 + best]) best = c;
                correct += best == te.y[a + r];
            }
        }
        free(logits);
        double acc = drv_sum(correct) / te.n;
        double loss = drv_sum(loss_sum / steps) / g_n;
        double sm = drv_max(step_time / steps);
        if (g_me == 0) {
            fprintf(stderr, "\n");
            printf("epoch %d np %d loss %.4f test_acc %.4f img_per_s %.0f step_ms %.3f\n", ep + 1, g_n, loss, acc,
                   steps * (double)batch / el, 1e3 * sm);
            fflush(stdout);
            if (csv) fprintf(csv, "%d %d %.6f %.6f %.1f %.4f\n", g_n, ep + 1, loss, acc, steps * (double)batch / el, 1e3 * sm), fflush(csv);
        }
    }
    if (csv) fclose(csv);
    free(idx), free(xb), free(yb);
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    ds_dataset_free(&tr);
    ds_dataset_free(&te);
}

int main(int argc, char **argv) {
    drv_opts o = {.warmup = -1};
    int train_mode = 0, epochs = 3, bench_iters = 0, train_hidden = 256, train_batch = 64;
    const char *csv = NULL, *lr_s = NULL, *profile = "dgx-h100";
    drv_flag extra[] = {
        {"--hidden", "hidden width of the graded MLP (default 64)", &g_hidden, NULL},
        {"--batch", "global batch of the graded steps (default 48; a multiple of the world size)", &g_batch, NULL},
        {"--steps", "training steps compared with single-rank training (default 4)", &g_steps, NULL},
        {"--bench", "time naive, bucketed and overlapped steps for N iterations instead of grading", &bench_iters, NULL},
        {"--train", "1: train on Fashion-MNIST instead of grading", &train_mode, NULL},
        {"--epochs", "training epochs (default 3)", &epochs, NULL},
        {"--train-hidden", "hidden width for --train (default 256)", &train_hidden, NULL},
        {"--train-batch", "global batch for --train (default 64)", &train_batch, NULL},
        {"--lr", "learning rate for --train (default 0.05)", NULL, &lr_s},
        {"--csv", "--train: write 'np epoch loss test_acc img_per_s step_ms' lines here", NULL, &csv},
        {"--profile", "NAME|FILE: cost-model profile for the predicted overlap and step (default dgx-h100)", NULL, &profile},
        {NULL, NULL, NULL, NULL}};
    drv_init(&argc, &argv, "lab06", "Lab 6: data parallelism with gradient buckets", &o, extra);
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    g_seed = pl_info()->seed;
    char perr[300];
    g_have_prof = plc_profile_load(&g_prof, profile, perr, sizeof perr) == 0;
    if (!g_have_prof && strcmp(profile, "dgx-h100")) pl_usage_error("--profile: %s", perr);
    if (g_hidden < 1 || g_hidden > 4096) pl_usage_error("--hidden %d: expected 1..4096", g_hidden);
    if (g_steps < 1 || g_steps > 64) pl_usage_error("--steps %d: expected 1..64", g_steps);
    if (g_batch < g_n || g_batch % g_n) pl_usage_error("--batch %d is not a positive multiple of the world size %d", g_batch, g_n);
    if (train_mode) {
        double lr = lr_s ? atof(lr_s) : 0.05;
        if (!(lr > 0) || epochs < 1 || train_batch < 1) pl_usage_error("--train: bad --lr, --epochs or --train-batch");
        train(epochs, csv, train_hidden, train_batch, lr);
        return drv_finish();
    }
    /* synthetic data: 28 x 28 inputs, 10 classes, from the counter RNG */
    ds_synthetic(&g_data, (size_t)g_batch * 16 + 64, 784, 10, g_seed);
    if (bench_iters > 0) {
        bench(bench_iters);
        ds_dataset_free(&g_data);
        return drv_finish();
    }
    drv_print("# lab06: %d rank(s), device %s, MLP 784-%d-%d-10, global batch %d, %d steps\n", g_n,
              pl_device_name(pl_info()->device), g_hidden, g_hidden, g_batch, g_steps);
    case_buckets(&CAPS_DEFAULT);
    case_buckets(&CAPS_TWO);
    case_buckets(&CAPS_MID);
    case_buckets(&CAPS_MANY);
    cases_mode(DDP_NAIVE);
    cases_mode(DDP_BUCKETED);
    cases_mode(DDP_OVERLAP);
    case_nosync();
    case_rebuild(&CAPS_MID);
    case_rebuild(&CAPS_MANY);
    ds_dataset_free(&g_data);
    drv_print("# %d case(s), %d failed\n", drv_cases_run(), drv_cases_failed());
    return drv_finish();
}
