/* kern_rope.c - rotary position embedding (adjacent pairs): CPU reference and dispatcher. */
#include "kern_rope.h"

#include <math.h>
#include <stddef.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

/* The angle in double: in float, pos * freq loses about pos * 6e-8 radians (1e-4 at
 * position 2048), more than the whole error budget of a float32 forward. The cos and sin
 * of a (token, pair) serve every head. */
void kern_rope_forward_ref(float *x, const int *pos, int n_tokens, int n_heads, int head_dim,
                           float theta) {
    int half = head_dim / 2;
    for (int t = 0; t < n_tokens; t++)
        for (int i = 0; i < half; i++) {
            double a = (double)pos[t] * pow((double)theta, -2.0 * i / head_dim);
            float c = (float)cos(a), s = (float)sin(a);
            for (int h = 0; h < n_heads; h++) {
                float *p = x + ((size_t)t * n_heads + h) * head_dim + 2 * i;
                float x0 = p[0], x1 = p[1];
                p[0] = x0 * c - x1 * s;
                p[1] = x0 * s + x1 * c;
            }
        }
}

/* ================================================================================== */
/* Dispatcher                                                                          */
/* ================================================================================== */

void kern_rope_cost(int n_tokens, int n_heads, int head_dim, double *bytes, double *flops) {
    double n = (double)n_tokens * n_heads * head_dim;
    /* x read and written in place, one position per token; per pair four products and
     * two sums, and per (token, pair) a power, a cosine and a sine */
    *bytes = 8.0 * n + 4.0 * n_tokens;
    *flops = 3.0 * n + 1.5 * KERN_TRANSCENDENTAL * (double)n_tokens * head_dim;
}

KERN_THUNK(rope_forward, kern_rope_forward_ref, float *, const int *, int, int, int, float)

void kern_rope_forward(float *x, const int *pos, int n_tokens, int n_heads, int head_dim,
                       float theta, pl_stream *s) {
    double bytes, flops;
    PL_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope rotates pairs: head_dim must be even");
    kern_rope_cost(n_tokens, n_heads, head_dim, &bytes, &flops);
    KERN_DISPATCH("rope_fwd", bytes, flops,
                  kern_rope_forward_cuda(x, pos, n_tokens, n_heads, head_dim, theta, s),
                  rope_forward, x, pos, n_tokens, n_heads, head_dim, theta);
}
