/* kern_residual.c - residual add: CPU reference and dispatcher. */
#include "kern_residual.h"

#include "pl_backend.h" // defines: pl_stream_ready
#include "pl_runtime.h" // defines: pl_info, PL_DEVICE_CUDA

void kern_residual_forward_ref(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void kern_residual_backward_ref(float *da, float *db, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

void kern_residual_forward(float *out, const float *a, const float *b, size_t n, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_residual_forward_cuda(out, a, b, n, s);
        return;
    }
#endif
    kern_residual_forward_ref(out, a, b, n);
}

void kern_residual_backward(float *da, float *db, const float *dout, size_t n, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_residual_backward_cuda(da, db, dout, n, s);
        return;
    }
#endif
    kern_residual_backward_ref(da, db, dout, n);
}
