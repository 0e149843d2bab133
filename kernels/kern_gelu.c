/* kern_gelu.c - GELU (tanh approximation): CPU reference and dispatcher. */
#include "kern_gelu.h"

#include <math.h>

#include "pl_backend.h" // defines: pl_stream_ready
#include "pl_runtime.h" // defines: pl_info, PL_DEVICE_CUDA

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

void kern_gelu_forward(float *out, const float *in, size_t n, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_gelu_forward_cuda(out, in, n, s);
        return;
    }
#endif
    (void)s;
    kern_gelu_forward_ref(out, in, n);
}

void kern_gelu_backward(float *dx, const float *dy, const float *x, size_t n, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_gelu_backward_cuda(dx, dy, x, n, s);
        return;
    }
#endif
    (void)s;
    kern_gelu_backward_ref(dx, dy, x, n);
}
