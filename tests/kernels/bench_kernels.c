/* bench_kernels.c - achieved memory bandwidth of the memory-bound kernels against a
 * device-to-device copy measured in the same run, printed as `ratio` lines (not asserted).
 * Bytes are the minimum each kernel must move (read inputs once, write outputs once), so
 * a ratio of 1.0 means the kernel streams memory as fast as cudaMemcpy does.
 *
 *   make bench-kernels        (cuda flavour, GPU; says so and exits 0 without one)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kern_bias.h"
#include "kern_gelu.h"
#include "kern_layernorm.h"
#include "kern_residual.h"
#include "kern_softmax.h"
#include "pl.h"

typedef struct {
    float *a, *b, *c, *d, *w, *bias, *mean, *rstd;
    int N, C, R, T;
    size_t n;
    int which;
} bench_arg;

enum { B_COPY, B_LN_FWD, B_LN_BWD, B_RESID, B_SOFTMAX, B_SOFTMAX_BWD, B_GELU, B_GELU_BWD, B_BIAS };

static void run(void *p) {
    bench_arg *a = p;
    switch (a->which) {
    case B_COPY: pl_copy(a->b, a->a, a->n * sizeof(float), NULL); break;
    case B_LN_FWD: kern_layernorm_forward(a->b, a->mean, a->rstd, a->a, a->w, a->bias, a->N, a->C, 1e-5f, NULL); break;
    case B_LN_BWD: kern_layernorm_backward(a->c, a->d, a->d + a->C, a->b, a->a, a->w, a->mean, a->rstd, a->N, a->C, NULL); break;
    case B_RESID: kern_residual_forward(a->c, a->a, a->b, a->n, NULL); break;
    case B_SOFTMAX: kern_softmax_forward(a->b, a->a, a->R, a->T, 0.125f, NULL); break;
    case B_SOFTMAX_BWD: kern_softmax_backward(a->c, a->a, a->b, a->R, a->T, 0.125f, NULL); break;
    case B_GELU: kern_gelu_forward(a->b, a->a, a->n, NULL); break;
    case B_GELU_BWD: kern_gelu_backward(a->c, a->b, a->a, a->n, NULL); break;
    case B_BIAS: kern_bias_forward(a->a, a->bias, a->N, a->C, NULL); break;
    }
}

static double gbps(bench_arg *a, double bytes) {
    pl_timing t = pl_time(run, a, 3, 20, pl_comm_world());
    return bytes / (t.median_us * 1e-6) / 1e9;
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CUDA) {
        if (pl_rank() == 0)
            printf("# bench_kernels: no GPU (device %s): nothing to measure\n",
                   pl_device_name(pl_info()->device));
        pl_finalize();
        return 0;
    }
    /* realistic sizes: GPT-2 small activations, batch 8 x 1024 tokens */
    bench_arg a = {0};
    a.N = 8 * 1024;
    a.C = 768;
    a.R = 8 * 12;
    a.T = 1024;
    a.n = (size_t)a.N * 4 * a.C; /* the MLP's hidden activations, 4C wide */
    size_t big = a.n > (size_t)a.R * a.T * a.T ? a.n : (size_t)a.R * a.T * a.T;
    a.a = pl_malloc_floats(big);
    a.b = pl_malloc_floats(big);
    a.c = pl_malloc_floats(big);
    a.d = pl_malloc_floats(2 * (size_t)a.C);
    a.w = pl_malloc_floats(a.C);
    a.bias = pl_malloc_floats(4 * (size_t)a.C);
    a.mean = pl_malloc_floats(a.N);
    a.rstd = pl_malloc_floats(a.N);
    pl_rng_fill(pl_tensor_view(a.a, 1, (int64_t)big), (int64_t)big, 0, 0, 1, 1, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill(pl_tensor_view(a.b, 1, (int64_t)big), (int64_t)big, 0, 0, 1, 2, PL_RNG_UNIFORM, -1, 1);
    pl_fill(a.w, 1.0f, a.C, NULL);
    pl_fill(a.bias, 0.5f, 4 * (size_t)a.C, NULL);
    pl_fill(a.d, 0.0f, 2 * (size_t)a.C, NULL);

    double F = sizeof(float), NC = (double)a.N * a.C, n = (double)a.n;
    double tri = (double)a.R * a.T * (a.T + 1) / 2.0, full = (double)a.R * a.T * a.T;
    a.which = B_COPY;
    double copy = gbps(&a, 2 * n * F);
    a.which = B_LN_FWD;
    kern_layernorm_forward(a.b, a.mean, a.rstd, a.a, a.w, a.bias, a.N, a.C, 1e-5f, NULL);
    struct { const char *name; int which; double bytes; } rows[] = {
        {"layernorm forward  [8192 x 768]", B_LN_FWD, 2 * NC * F},
        {"layernorm backward [8192 x 768]", B_LN_BWD, 3 * NC * F},
        {"residual forward   [8192 x 3072]", B_RESID, 3 * n * F},
        {"softmax causal fwd [96 x 1024 x 1024]", B_SOFTMAX, (tri + full) * F},
        {"softmax causal bwd [96 x 1024 x 1024]", B_SOFTMAX_BWD, (2 * tri + full) * F},
        {"gelu forward       [8192 x 3072]", B_GELU, 2 * n * F},
        {"gelu backward      [8192 x 3072]", B_GELU_BWD, 3 * n * F},
        {"bias add           [8192 x 768]", B_BIAS, 2 * NC * F},
    };
    if (pl_rank() == 0) printf("# device-to-device copy: %.0f GB/s (read + write, %.0f MiB)\n", copy, n * F / 1048576);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        a.which = rows[i].which;
        double bw = gbps(&a, rows[i].bytes);
        if (pl_rank() == 0)
            printf("ratio kernel bandwidth %-38s / copy  %6.3f   (%.0f GB/s vs copy %.0f GB/s, target >= 0.7)\n",
                   rows[i].name, bw / copy, bw, copy);
    }
    float *bufs[] = {a.a, a.b, a.c, a.d, a.w, a.bias, a.mean, a.rstd};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_free(bufs[i]);
    pl_finalize();
    return 0;
}
