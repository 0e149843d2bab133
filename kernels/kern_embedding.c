/* kern_embedding.c - token + position embedding: CPU reference and dispatcher. */
#include "kern_embedding.h"

#include "pl_backend.h" // defines: pl_stream_ready
#include "pl_runtime.h" // defines: pl_info, PL_DEVICE_CUDA

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

void kern_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                            int T, int B, int C, int t0, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_embedding_forward_cuda(out, tokens, wte, wpe, T, B, C, t0, s);
        return;
    }
#endif
    kern_embedding_forward_ref(out, tokens, wte, wpe, T, B, C, t0);
}

void kern_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int T, int B, int C, int t0, pl_stream *s) {
    s = pl_stream_ready(s);
#ifdef PL_HAVE_CUDA
    if (pl_info()->device == PL_DEVICE_CUDA) {
        kern_embedding_backward_cuda(dwte, dwpe, dout, tokens, T, B, C, t0, s);
        return;
    }
#endif
    kern_embedding_backward_ref(dwte, dwpe, dout, tokens, T, B, C, t0);
}
