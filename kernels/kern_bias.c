/* kern_bias.c - bias add and bias gradient: CPU reference and dispatcher. */
#include "kern_bias.h"

#include <stddef.h>

#include "pl_backend.h" // defines: pl_stream_ready
#include "pl_runtime.h" // defines: pl_info, PL_DEVICE_CUDA

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_bias_forward_ref(float *y, const float *bias, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *row = y + (size_t)r * cols;
        for (int c = 0; c < cols; c++) row[c] += bias[c];
    }
}

/* Rows outer, columns inner: reads dy in memory order. */
void kern_bias_backward_ref(float *dbias, const float *dy, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        const float *row = dy + (size_t)r * cols;
        for (int c = 0; c < cols; c++) dbias[c] += row[c];
    }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_bias_forward(float *y, const float *bias, int rows, int cols, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_bias_forward_cuda(y, bias, rows, cols, s);
        return;
    }
#endif
    (void)s;
    kern_bias_forward_ref(y, bias, rows, cols);
}

void kern_bias_backward(float *dbias, const float *dy, int rows, int cols, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_bias_backward_cuda(dbias, dy, rows, cols, s);
        return;
    }
#endif
    (void)s;
    kern_bias_backward_ref(dbias, dy, rows, cols);
}
