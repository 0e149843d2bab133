/* kern_embedding.c - token + position embedding: CPU reference and dispatcher. */
#include "kern_embedding.h"

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

void kern_embedding_forward_ref(float *out, const int *tokens, const float *wte,
                                const float *wpe, int T, int B, int C, int t0) {
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            const float *e = wte + (size_t)tokens[t * B + b] * C;
            const float *p = wpe + (size_t)(t0 + t) * C;
            float *o = out + ((size_t)t * B + b) * C;
            for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        }
}

void kern_embedding_backward_ref(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                 int T, int B, int C, int t0) {
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)t * B + b) * C;
            float *de = dwte + (size_t)tokens[t * B + b] * C;
            float *dp = dwpe + (size_t)(t0 + t) * C;
            for (int c = 0; c < C; c++) {
                de[c] += d[c];
                dp[c] += d[c];
            }
        }
}

void kern_embedding_cost(int T, int B, int C, int backward, double *bytes, double *flops) {
    double rows = (double)T * B;
    /* per row: the token id, then C floats of wte and wpe read and out written (forward),
     * or dout read and both gradient rows read and written (backward) */
    *bytes = ((backward ? 20.0 : 12.0) * C + 4) * rows;
    *flops = (backward ? 2.0 : 1.0) * rows * C;
}

KERN_THUNK(embedding_forward, kern_embedding_forward_ref,
            float *, const int *, const float *, const float *, int, int, int, int)
KERN_THUNK(embedding_backward, kern_embedding_backward_ref,
            float *, float *, const float *, const int *, int, int, int, int)

void kern_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                            int T, int B, int C, int t0, pl_stream *s) {
    double bytes, flops;
    kern_embedding_cost(T, B, C, 0, &bytes, &flops);
    KERN_DISPATCH("embedding_fwd", bytes, flops,
                  kern_embedding_forward_cuda(out, tokens, wte, wpe, T, B, C, t0, s),
                  embedding_forward, out, tokens, wte, wpe, T, B, C, t0);
}

void kern_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int T, int B, int C, int t0, pl_stream *s) {
    double bytes, flops;
    kern_embedding_cost(T, B, C, 1, &bytes, &flops);
    KERN_DISPATCH("embedding_bwd", bytes, flops,
                  kern_embedding_backward_cuda(dwte, dwpe, dout, tokens, T, B, C, t0, s),
                  embedding_backward, dwte, dwpe, dout, tokens, T, B, C, t0);
}
