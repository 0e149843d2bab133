/* kern_gelu.c - GELU (tanh approximation): CPU reference and dispatcher. */
#include "kern_gelu.h"

#include <math.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

void kern_gelu_forward_ref(float *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float x = in[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x)));
    }
}

/* d/dx: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2), t = tanh(k (x + c x^3)). */
void kern_gelu_backward_ref(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dy[i] * d;
    }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_gelu_cost(size_t n, int backward, double *bytes, double *flops) {
    /* forward: x^3, the affine, tanh, 1 + t, two products; backward adds the derivative */
    *bytes = (backward ? 12.0 : 8.0) * (double)n;
    *flops = ((backward ? 18 : 8) + KERN_TRANSCENDENTAL) * (double)n;
}

KERN_THUNK(gelu_forward, kern_gelu_forward_ref, float *, const float *, size_t)
KERN_THUNK(gelu_backward, kern_gelu_backward_ref, float *, const float *, const float *, size_t)

void kern_gelu_forward(float *out, const float *in, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_gelu_cost(n, 0, &bytes, &flops);
    KERN_DISPATCH("gelu_fwd", bytes, flops,
                  kern_gelu_forward_cuda(out, in, n, s),
                  gelu_forward, out, in, n);
}

void kern_gelu_backward(float *dx, const float *dy, const float *x, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_gelu_cost(n, 1, &bytes, &flops);
    KERN_DISPATCH("gelu_bwd", bytes, flops,
                  kern_gelu_backward_cuda(dx, dy, x, n, s),
                  gelu_backward, dx, dy, x, n);
}
