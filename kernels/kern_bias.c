/* kern_bias.c - bias add and bias gradient: CPU reference and dispatcher. */
#include "kern_bias.h"

#include <stddef.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

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

void kern_bias_cost(int rows, int cols, int backward, double *bytes, double *flops) {
    double rc = (double)rows * cols;
    /* forward: y read and written, bias read; backward: dy read, dbias read and written */
    *bytes = backward ? 4.0 * rc + 8.0 * cols : 8.0 * rc + 4.0 * cols;
    *flops = rc;
}

KERN_THUNK(bias_forward, kern_bias_forward_ref, float *, const float *, int, int)
KERN_THUNK(bias_backward, kern_bias_backward_ref, float *, const float *, int, int)

void kern_bias_forward(float *y, const float *bias, int rows, int cols, pl_stream *s) {
    double bytes, flops;
    kern_bias_cost(rows, cols, 0, &bytes, &flops);
    KERN_DISPATCH("bias_fwd", bytes, flops,
                  kern_bias_forward_cuda(y, bias, rows, cols, s),
                  bias_forward, y, bias, rows, cols);
}

void kern_bias_backward(float *dbias, const float *dy, int rows, int cols, pl_stream *s) {
    double bytes, flops;
    kern_bias_cost(rows, cols, 1, &bytes, &flops);
    KERN_DISPATCH("bias_bwd", bytes, flops,
                  kern_bias_backward_cuda(dbias, dy, rows, cols, s),
                  bias_backward, dbias, dy, rows, cols);
}
