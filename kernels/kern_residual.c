/* kern_residual.c - residual add: CPU reference and dispatcher. */
#include "kern_residual.h"

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

void kern_residual_forward_ref(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void kern_residual_backward_ref(float *da, float *db, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

void kern_residual_cost(size_t n, int backward, double *bytes, double *flops) {
    /* forward: a, b read, out written; backward: dout read, da and db read and written */
    *bytes = (backward ? 20.0 : 12.0) * (double)n;
    *flops = (backward ? 2.0 : 1.0) * (double)n;
}

KERN_THUNK(residual_forward, kern_residual_forward_ref,
            float *, const float *, const float *, size_t)
KERN_THUNK(residual_backward, kern_residual_backward_ref, float *, float *, const float *, size_t)

void kern_residual_forward(float *out, const float *a, const float *b, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_residual_cost(n, 0, &bytes, &flops);
    KERN_DISPATCH("residual_fwd", bytes, flops,
                  kern_residual_forward_cuda(out, a, b, n, s),
                  residual_forward, out, a, b, n);
}

void kern_residual_backward(float *da, float *db, const float *dout, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_residual_cost(n, 1, &bytes, &flops);
    KERN_DISPATCH("residual_bwd", bytes, flops,
                  kern_residual_backward_cuda(da, db, dout, n, s),
                  residual_backward, da, db, dout, n);
}
