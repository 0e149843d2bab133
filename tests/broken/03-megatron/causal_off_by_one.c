// expect: wrong forward.nosp
/* Broken on purpose: the causal mask lets position t see position t+1 (j <= t+1), i.e.
 * one token of the future. Plain loops on the cpu device, where device memory is host
 * memory. */
#include <math.h>
#include "kern_attention.h"
static void broken_attention_forward(float *out, float *probs, const float *qkv, int T, int B,
                                     int H, int hs, float scale, pl_stream *s) {
    pl_stream_sync(s ? s : pl_stream_compute());
    size_t ldq = (size_t)3 * H * hs, ldo = (size_t)H * hs;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                int last = t + 1 < T ? t + 1 : T - 1; /* the bug */
                float *P = probs + (((size_t)b * H + h) * T + t) * T, mx = -INFINITY, sum = 0;
                const float *q = qkv + ((size_t)t * B + b) * ldq + (size_t)3 * hs * h;
                for (int j = 0; j < T; j++) {
                    const float *k = qkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + hs;
                    float dot = 0;
                    for (int e = 0; e < hs; e++) dot += q[e] * k[e];
                    P[j] = j <= last ? scale * dot : -INFINITY;
                    mx = fmaxf(mx, P[j]);
                }
                for (int j = 0; j < T; j++) sum += (P[j] = j <= last ? expf(P[j] - mx) : 0.0f);
                for (int j = 0; j < T; j++) P[j] /= sum;
                float *o = out + ((size_t)t * B + b) * ldo + (size_t)hs * h;
                for (int e = 0; e < hs; e++) {
                    float acc = 0;
                    for (int j = 0; j <= last; j++) acc += P[j] * qkv[((size_t)j * B + b) * ldq + (size_t)3 * hs * h + 2 * hs + e];
                    o[e] = acc;
                }
            }
}
#define kern_attention_forward broken_attention_forward
#include "../../../solutions/03-megatron/megatron.c"
