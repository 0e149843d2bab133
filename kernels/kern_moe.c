/* kern_moe.c - a mixture-of-experts layer's token moves: CPU references and dispatchers. */
#include "kern_moe.h"

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU references                                                                      */
/* ================================================================================== */

void kern_moe_scatter_ref(float *rows, const float *x, const int *slot, const float *scale, int T, int k, int H) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            int r = slot[t * k + j];
            if (r < 0) continue;
            float a = scale ? scale[t * k + j] : 1.0f;
            for (int c = 0; c < H; c++) rows[(size_t)r * H + c] = a * x[(size_t)t * H + c];
        }
}

/* Assignments are added in j order, starting from 0: the order the CUDA version keeps. */
void kern_moe_gather_ref(float *out, const float *rows, const int *slot, const float *weight, int T, int k, int H) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < H; c++) {
            float acc = 0;
            for (int j = 0; j < k; j++) {
                int r = slot[t * k + j];
                if (r >= 0) acc += (weight ? weight[t * k + j] : 1.0f) * rows[(size_t)r * H + c];
            }
            out[(size_t)t * H + c] = acc;
        }
}

/* Summed in double: the gates' gradient is a reduction over H and should not depend on it. */
void kern_moe_rowdot_ref(float *dot, const float *a, const float *rows, const int *slot, int T, int k, int H) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            int r = slot[t * k + j];
            double acc = 0;
            for (int c = 0; r >= 0 && c < H; c++) acc += (double)a[(size_t)t * H + c] * rows[(size_t)r * H + c];
            dot[t * k + j] = (float)acc;
        }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

/* Kept rows move H floats each way; gather also writes every output row; rowdot reads two. */
void kern_moe_cost(int which, int T, int k, int H, int kept, double *bytes, double *flops) {
    double idx = 4.0 * T * k, rows = 4.0 * (double)kept * H;
    switch (which) {
    case 0: *bytes = idx + 2 * rows + (double)4 * T * k, *flops = (double)kept * H; break;
    case 1: *bytes = idx + rows + 4.0 * T * H + 4.0 * T * k, *flops = 2.0 * kept * H; break;
    default: *bytes = idx + 2 * rows + 4.0 * T * k, *flops = 2.0 * kept * H; break;
    }
}

static int kept_of(const int *slot, int n) {
    int m = 0;
    for (int i = 0; i < n; i++) m += slot[i] >= 0;
    return m;
}

/* The cost needs the number of kept slots, a host count: exact on the cpu device (once the
 * stream's earlier work, which may write the slots, is done), the upper bound T*k on the
 * cuda device (where the slots are in GPU memory). */
static int kept_for_cost(const int *slot, int n, pl_stream **s) {
    *s = pl_stream_ready(*s);
    return pl_info()->device == PL_DEVICE_CUDA ? n : kept_of(slot, n);
}

/* what a deferred stream keeps of each CPU reference's arguments (kern_dispatch.h) */
KERN_THUNK(kern_moe_scatter_ref, kern_moe_scatter_ref, float *, const float *, const int *, const float *, int, int, int)
KERN_THUNK(kern_moe_gather_ref, kern_moe_gather_ref, float *, const float *, const int *, const float *, int, int, int)
KERN_THUNK(kern_moe_rowdot_ref, kern_moe_rowdot_ref, float *, const float *, const float *, const int *, int, int, int)

void kern_moe_scatter(float *rows, const float *x, const int *slot, const float *scale, int T, int k, int H,
                      pl_stream *s) {
    double bytes, flops;
    kern_moe_cost(0, T, k, H, kept_for_cost(slot, T * k, &s), &bytes, &flops);
    KERN_DISPATCH("moe_scatter", bytes, flops, kern_moe_scatter_cuda(rows, x, slot, scale, T, k, H, s),
                  kern_moe_scatter_ref, rows, x, slot, scale, T, k, H);
}

void kern_moe_gather(float *out, const float *rows, const int *slot, const float *weight, int T, int k, int H,
                     pl_stream *s) {
    double bytes, flops;
    kern_moe_cost(1, T, k, H, kept_for_cost(slot, T * k, &s), &bytes, &flops);
    KERN_DISPATCH("moe_gather", bytes, flops, kern_moe_gather_cuda(out, rows, slot, weight, T, k, H, s),
                  kern_moe_gather_ref, out, rows, slot, weight, T, k, H);
}

void kern_moe_rowdot(float *dot, const float *a, const float *rows, const int *slot, int T, int k, int H,
                     pl_stream *s) {
    double bytes, flops;
    kern_moe_cost(2, T, k, H, kept_for_cost(slot, T * k, &s), &bytes, &flops);
    KERN_DISPATCH("moe_rowdot", bytes, flops, kern_moe_rowdot_cuda(dot, a, rows, slot, T, k, H, s),
                  kern_moe_rowdot_ref, dot, a, rows, slot, T, k, H);
}
