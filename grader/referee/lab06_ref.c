/* lab06_ref.c (referee) - Lab 6's reference: the MLP trained on one rank in float64 with
 * plain loops (not the kernels the player's model runs), the initial weights, and the
 * bucketing rule. What data-parallel training must equal: every rank's local mean gradient,
 * averaged over the ranks, is the global batch's mean gradient, so k steps of DDP are k
 * steps of single-rank SGD on the global batch, up to float reassociation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lab06_ref.h"

void l6_weights(float *w, int h, uint64_t seed) {
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        int rows, cols, fan_in;
        lab6_shape(h, i, &rows, &cols, &fan_in);
        float bound = 1.0f / sqrtf((float)fan_in);
        pl_rng_fill_host(w + lab6_offset(h, i), rows, cols, cols, 0, 0, seed, 600 + (uint64_t)i, PL_RNG_UNIFORM, -bound,
                         bound);
    }
}

void l6_grad0(float *g, int h, uint64_t seed) {
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        int rows, cols, fan_in;
        lab6_shape(h, i, &rows, &cols, &fan_in);
        pl_rng_fill_host(g + lab6_offset(h, i), rows, cols, cols, 0, 0, seed, 700 + (uint64_t)i, PL_RNG_UNIFORM, -0.01f,
                         0.01f);
    }
}

/* ==================================================================================== */
/* The model in float64                                                                  */
/* ==================================================================================== */

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi): GELU's tanh approximation */
#define GELU_C 0.044715

static double gelu(double x) { return 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x))); }
static double gelu_grad(double x) {
    double t = tanh(GELU_K * (x + GELU_C * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

typedef struct {
    int h;
    double *p[LAB6_NPARAMS], *g[LAB6_NPARAMS], *mom[LAB6_NPARAMS];
} model64;

/* y[r][o] = b[o] + sum_i x[r][i] W[o][i] */
static void linear(double *y, const double *x, const double *W, const double *b, int rows, int in, int out) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++) s += x[(size_t)r * in + i] * W[(size_t)o * in + i];
            y[(size_t)r * out + o] = s;
        }
}

/* dW[o][i] += sum_r dy[r][o] x[r][i]; db[o] += sum_r dy[r][o]; dx (if not NULL) = dy W. */
static void linear_back(double *dW, double *db, double *dx, const double *dy, const double *x, const double *W, int rows,
                        int in, int out) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double d = dy[(size_t)r * out + o];
            db[o] += d;
            for (int i = 0; i < in; i++) dW[(size_t)o * in + i] += d * x[(size_t)r * in + i];
        }
    if (!dx) return;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int o = 0; o < out; o++) s += dy[(size_t)r * out + o] * W[(size_t)o * in + i];
            dx[(size_t)r * in + i] = s;
        }
}

/* The gradient of the mean loss over `rows` rows, added to m->g. */
static void gradient(model64 *m, const float *xf, const int *y, int rows) {
    int H = m->h, C = LAB6_CLASSES, I = LAB6_IN;
    size_t R = (size_t)rows;
    double *x = xcalloc(R * I, sizeof *x), *a1 = xcalloc(R * H, sizeof *a1), *h1 = xcalloc(R * H, sizeof *h1);
    double *a2 = xcalloc(R * H, sizeof *a2), *h2 = xcalloc(R * H, sizeof *h2), *z = xcalloc(R * C, sizeof *z);
    double *dh2 = xcalloc(R * H, sizeof *dh2), *dh1 = xcalloc(R * H, sizeof *dh1);
    for (size_t i = 0; i < R * I; i++) x[i] = xf[i];
    linear(a1, x, m->p[P_W1], m->p[P_B1], rows, I, H);
    for (size_t i = 0; i < R * H; i++) h1[i] = gelu(a1[i]);
    linear(a2, h1, m->p[P_W2], m->p[P_B2], rows, H, H);
    for (size_t i = 0; i < R * H; i++) h2[i] = gelu(a2[i]);
    linear(z, h2, m->p[P_W3], m->p[P_B3], rows, H, C);
    /* softmax cross-entropy, mean over the rows: dz = (softmax - onehot) / rows */
    for (int r = 0; r < rows; r++) {
        double *zr = z + (size_t)r * C, mx = zr[0], sum = 0;
        for (int c = 1; c < C; c++) mx = zr[c] > mx ? zr[c] : mx;
        for (int c = 0; c < C; c++) sum += exp(zr[c] - mx);
        for (int c = 0; c < C; c++) zr[c] = (exp(zr[c] - mx) / sum - (c == y[r] ? 1.0 : 0.0)) / rows;
    }
    linear_back(m->g[P_W3], m->g[P_B3], dh2, z, h2, m->p[P_W3], rows, H, C);
    for (size_t i = 0; i < R * H; i++) dh2[i] *= gelu_grad(a2[i]);
    linear_back(m->g[P_W2], m->g[P_B2], dh1, dh2, h1, m->p[P_W2], rows, H, H);
    for (size_t i = 0; i < R * H; i++) dh1[i] *= gelu_grad(a1[i]);
    linear_back(m->g[P_W1], m->g[P_B1], NULL, dh1, x, m->p[P_W1], rows, I, H);
    free(x), free(a1), free(h1), free(a2), free(h2), free(z), free(dh2), free(dh1);
}

double *l6_train(const float *w0, const float *g0, int h, const float *x, const int *y, int kind, int steps, int batch) {
    model64 m = {.h = h};
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        size_t n = lab6_numel(h, i);
        m.p[i] = xcalloc(n, sizeof(double)), m.g[i] = xcalloc(n, sizeof(double)), m.mom[i] = xcalloc(n, sizeof(double));
        for (size_t k = 0; k < n; k++) m.p[i][k] = w0[lab6_offset(h, i) + k];
        for (size_t k = 0; g0 && k < n; k++) m.g[i][k] = g0[lab6_offset(h, i) + k];
    }
    /* the model's float constants, exactly */
    const double lr = (double)LAB6_LR, mu = (double)LAB6_MOMENTUM;
    for (int s = 0; s < steps; s++) {
        if (!lab6_step_accumulates(kind, s))
            for (int i = 0; i < LAB6_NPARAMS; i++) memset(m.g[i], 0, lab6_numel(h, i) * sizeof(double));
        gradient(&m, x + (size_t)s * batch * LAB6_IN, y + (size_t)s * batch, batch);
        if (!lab6_step_optimizes(kind, s)) continue;
        for (int i = 0; i < LAB6_NPARAMS; i++)
            for (size_t k = 0; k < lab6_numel(h, i); k++) {
                m.mom[i][k] = mu * m.mom[i][k] + m.g[i][k];
                m.p[i][k] -= lr * m.mom[i][k];
            }
    }
    double *out = xcalloc(lab6_total(h), sizeof *out);
    for (int i = 0; i < LAB6_NPARAMS; i++) {
        memcpy(out + lab6_offset(h, i), m.p[i], lab6_numel(h, i) * sizeof(double));
        free(m.p[i]), free(m.g[i]), free(m.mom[i]);
    }
    return out;
}

uint64_t l6_hash(const float *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t k = 0; k < n * sizeof *p; k++) h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

/* ==================================================================================== */
/* The bucketing rule                                                                    */
/* ==================================================================================== */

/* A bucket closes once its size in whole bytes reaches its cap: PyTorch takes the cap as
 * int(cap_mb * 1024 * 1024) bytes, so the comparison is between integers. */
static size_t cap_bytes(double mb) { return (size_t)(mb * 1048576.0); }

l6_expected l6_layout_rule(int h, const int *order, double cap_mb, double first_mb) {
    l6_expected L;
    memset(&L, 0, sizeof L);
    size_t bytes = 0;
    for (int k = 0; k < LAB6_NPARAMS; k++) {
        if (L.nbuckets == 0 || bytes >= cap_bytes(L.nbuckets == 1 ? first_mb : cap_mb)) L.nbuckets++, bytes = 0;
        int b = L.nbuckets - 1;
        L.params[b][L.nparams[b]++] = order[k];
        bytes += lab6_numel(h, order[k]) * sizeof(float);
    }
    return L;
}
