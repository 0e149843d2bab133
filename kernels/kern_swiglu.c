/* kern_swiglu.c - SwiGLU (silu(gate) * up): CPU reference and dispatcher. */
#include "kern_swiglu.h"

#include <math.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

/* x / (1 + e^-x) rather than x * sigmoid(x) written with e^x: for very negative x, e^-x
 * overflows to inf and the quotient goes cleanly to -0; for large x, e^-x underflows to 0
 * and the quotient is x. */
void kern_swiglu_forward_ref(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* Each element's inputs are read before its outputs are written, so gate/up may be the
 * outputs (in place). */
void kern_swiglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                              size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dout[i];
        float sg = 1.0f / (1.0f + expf(-g));
        dgate[i] = d * u * sg * (1.0f + g * (1.0f - sg));
        dup[i] = d * g * sg;
    }
}

/* ================================================================================== */
/* Dispatcher                                                                          */
/* ================================================================================== */

void kern_swiglu_cost(size_t n, double *bytes, double *flops) {
    /* gate and up read, out written; an exp, an add, a division and a product each */
    *bytes = 12.0 * (double)n;
    *flops = (3.0 + KERN_TRANSCENDENTAL) * (double)n;
}

KERN_THUNK(swiglu_forward, kern_swiglu_forward_ref, float *, const float *, const float *, size_t)

/* what a deferred stream keeps of each CPU reference's arguments (kern_dispatch.h) */
KERN_THUNK(kern_swiglu_backward_ref, kern_swiglu_backward_ref, float *, float *, const float *, const float *, const float *, size_t)

void kern_swiglu_forward(float *out, const float *gate, const float *up, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_swiglu_cost(n, &bytes, &flops);
    KERN_DISPATCH("swiglu_fwd", bytes, flops,
                  kern_swiglu_forward_cuda(out, gate, up, n, s),
                  swiglu_forward, out, gate, up, n);
}

void kern_swiglu_backward_cost(size_t n, double *bytes, double *flops) {
    /* dout, gate, up read, dgate, dup written; an exp and about ten operations */
    *bytes = 20.0 * (double)n;
    *flops = (10.0 + KERN_TRANSCENDENTAL) * (double)n;
}

void kern_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n,
                          pl_stream *s) {
    double bytes, flops;
    kern_swiglu_backward_cost(n, &bytes, &flops);
    KERN_DISPATCH("swiglu_bwd", bytes, flops,
                  kern_swiglu_backward_cuda(dgate, dup, dout, gate, up, n, s),
                  kern_swiglu_backward_ref, dgate, dup, dout, gate, up, n);
}
