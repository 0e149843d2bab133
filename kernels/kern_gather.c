/* kern_gather.c - row gather: CPU reference and dispatcher. */
#include "kern_gather.h"

#include <stddef.h>
#include <string.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

void kern_gather_rows_ref(float *out, const float *src, const int *idx, int n, int C) {
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * C, src + (size_t)idx[i] * C, (size_t)C * sizeof(float));
}

void kern_gather_cost(int n, int C, double *bytes, double *flops) {
    /* one index and one row read, one row written */
    *bytes = (8.0 * C + 4.0) * n;
    *flops = 0.0;
}

KERN_THUNK(gather_rows, kern_gather_rows_ref, float *, const float *, const int *, int, int)

void kern_gather_rows(float *out, const float *src, const int *idx, int n, int C, pl_stream *s) {
    double bytes, flops;
    kern_gather_cost(n, C, &bytes, &flops);
    KERN_DISPATCH("gather_rows", bytes, flops, kern_gather_rows_cuda(out, src, idx, n, C, s),
                  gather_rows, out, src, idx, n, C);
}
