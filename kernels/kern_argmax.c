/* kern_argmax.c - row-wise argmax: CPU reference and dispatcher. */
#include "kern_argmax.h"

#include <math.h>
#include <stddef.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_argmax_ref(int *idx, const float *x, int N, int V) {
    for (int i = 0; i < N; i++) {
        const float *r = x + (size_t)i * V;
        int best = -1;
        for (int j = 0; j < V; j++)
            if (!isnan(r[j]) && (best < 0 || r[j] > r[best])) best = j;
        idx[i] = best < 0 ? 0 : best;
    }
}

/* ================================================================================== */
/* Dispatcher                                                                          */
/* ================================================================================== */

void kern_argmax_cost(int N, int V, double *bytes, double *flops) {
    /* every value read once and compared once, one index written per row */
    *bytes = 4.0 * N * V + 4.0 * N;
    *flops = (double)N * V;
}

KERN_THUNK(argmax, kern_argmax_ref, int *, const float *, int, int)

void kern_argmax(int *idx, const float *x, int N, int V, pl_stream *s) {
    double bytes, flops;
    kern_argmax_cost(N, V, &bytes, &flops);
    KERN_DISPATCH("argmax", bytes, flops, kern_argmax_cuda(idx, x, N, V, s), argmax, idx, x, N, V);
}
