/* kern_attention.c - causal multi-head attention: the plain-loop CPU reference, and the
 * dispatcher built from pl_gemm and the causal softmax (runs on either device). */
#include "kern_attention.h"

#include <math.h>
#include <stddef.h>

#include "kern_softmax.h" // defines: kern_softmax_forward, kern_softmax_backward

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_attention_forward_ref(float *out, float *probs, const float *qkv, int T, int B, int H,
                                int hs, float scale) {
    size_t ldq = (size_t)3 * H * hs, ldo = (size_t)H * hs;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float *P = probs + ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)t * B + b) * ldq + (size_t)3 * hs * h;
                float mx = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + hs;
                    float dot = 0.0f;
                    for (int d = 0; d < hs; d++) dot += q[d] * k[d];
                    P[(size_t)t * T + j] = scale * dot;
                    mx = fmaxf(mx, scale * dot);
                }
                float sum = 0.0f;
                for (int j = 0; j <= t; j++) {
                    float e = expf(P[(size_t)t * T + j] - mx);
                    P[(size_t)t * T + j] = e;
                    sum += e;
                }
                for (int j = 0; j < T; j++) P[(size_t)t * T + j] = j <= t ? P[(size_t)t * T + j] / sum : 0.0f;
                float *o = out + ((size_t)t * B + b) * ldo + (size_t)hs * h;
                for (int d = 0; d < hs; d++) o[d] = 0.0f;
                for (int j = 0; j <= t; j++) {
                    const float *v = qkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + 2 * hs;
                    float p = P[(size_t)t * T + j];
                    for (int d = 0; d < hs; d++) o[d] += p * v[d];
                }
            }
        }
}

void kern_attention_backward_ref(float *dqkv, float *dscratch, const float *dout,
                                 const float *qkv, const float *probs, int T, int B, int H,
                                 int hs, float scale) {
    size_t ldq = (size_t)3 * H * hs, ldo = (size_t)H * hs;
    for (size_t i = 0; i < (size_t)T * B * ldq; i++) dqkv[i] = 0.0f;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *P = probs + ((size_t)b * H + h) * T * T;
            float *dS = dscratch + ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *dO = dout + ((size_t)t * B + b) * ldo + (size_t)hs * h;
                /* dP[t, j] = dO[t] . v[j]; dv[j] += P[t, j] dO[t] */
                float dot = 0.0f;
                for (int j = 0; j < T; j++) {
                    float dp = 0.0f;
                    if (j <= t) {
                        const float *v = qkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + 2 * hs;
                        float *dv = dqkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + 2 * hs;
                        for (int d = 0; d < hs; d++) {
                            dp += dO[d] * v[d];
                            dv[d] += P[(size_t)t * T + j] * dO[d];
                        }
                    }
                    dS[(size_t)t * T + j] = dp;
                    dot += P[(size_t)t * T + j] * dp;
                }
                for (int j = 0; j < T; j++)
                    dS[(size_t)t * T + j] = j <= t ? scale * P[(size_t)t * T + j] * (dS[(size_t)t * T + j] - dot) : 0.0f;
                /* dq[t] = sum_j dS[t, j] k[j]; dk[j] += dS[t, j] q[t] */
                const float *q = qkv + ((size_t)t * B + b) * ldq + (size_t)3 * hs * h;
                float *dq = dqkv + ((size_t)t * B + b) * ldq + (size_t)3 * hs * h;
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + hs;
                    float *dk = dqkv + ((size_t)j * B + b) * ldq + (size_t)3 * hs * h + hs;
                    float g = dS[(size_t)t * T + j];
                    for (int d = 0; d < hs; d++) {
                        dq[d] += g * k[d];
                        dk[d] += g * q[d];
                    }
                }
            }
        }
}

/* ================================================================================== */
/* Dispatcher: per head, S = Q K^T, P = softmax(scale S) (masked), O = P V              */
/* ================================================================================== */

void kern_attention_forward(float *out, float *probs, const float *qkv, int T, int B, int H,
                            int hs, float scale, pl_stream *s) {
    /* row t of batch b sits at row t*B + b: stepping t skips B rows */
    int ldq = 3 * H * hs * B, ldo = H * hs * B;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *Q = qkv + (size_t)b * 3 * H * hs + (size_t)3 * hs * h;
            float *S = probs + ((size_t)b * H + h) * T * T;
            pl_gemm(false, true, T, T, hs, 1.0f, Q, ldq, Q + hs, ldq, 0.0f, S, T, s);
        }
    kern_softmax_forward(probs, probs, B * H, T, scale, s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *V = qkv + (size_t)b * 3 * H * hs + (size_t)3 * hs * h + 2 * hs;
            const float *P = probs + ((size_t)b * H + h) * T * T;
            float *O = out + (size_t)b * H * hs + (size_t)hs * h;
            pl_gemm(false, false, T, hs, T, 1.0f, P, T, V, ldq, 0.0f, O, ldo, s);
        }
}

void kern_attention_backward(float *dqkv, float *dscratch, const float *dout, const float *qkv,
                             const float *probs, int T, int B, int H, int hs, float scale,
                             pl_stream *s) {
    int ldq = 3 * H * hs * B, ldo = H * hs * B;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t qo = (size_t)b * 3 * H * hs + (size_t)3 * hs * h;
            const float *dO = dout + (size_t)b * H * hs + (size_t)hs * h;
            const float *P = probs + ((size_t)b * H + h) * T * T;
            float *dP = dscratch + ((size_t)b * H + h) * T * T;
            pl_gemm(false, true, T, T, hs, 1.0f, dO, ldo, qkv + qo + 2 * hs, ldq, 0.0f, dP, T, s);
            pl_gemm(true, false, T, hs, T, 1.0f, P, T, dO, ldo, 0.0f, dqkv + qo + 2 * hs, ldq, s);
        }
    kern_softmax_backward(dscratch, dscratch, probs, B * H, T, scale, s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t qo = (size_t)b * 3 * H * hs + (size_t)3 * hs * h;
            const float *dS = dscratch + ((size_t)b * H + h) * T * T;
            pl_gemm(false, false, T, hs, T, 1.0f, dS, T, qkv + qo + hs, ldq, 0.0f, dqkv + qo, ldq, s);
            pl_gemm(true, false, T, hs, T, 1.0f, dS, T, qkv + qo, ldq, 0.0f, dqkv + qo + hs, ldq, s);
        }
}
