/* kern_flash.c - block attention with its log-sum-exp, and the merge: CPU reference and
 * dispatcher. */
#include "kern_flash.h"

#include <math.h>
#include <stddef.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

void kern_flash_block_ref(float *o, float *lse, const float *q, const float *k, const float *v,
                          const int *q_pos, const int *k_pos, int nq, int nk, int H, int Hkv, int d,
                          int causal, float scale) {
    int group = Hkv > 0 ? H / Hkv : 1;
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < H; h++) {
            size_t row = (size_t)i * H + h;
            const float *qi = q + row * d;
            float *oi = o + row * d;
            int kh = h / group;
            for (int c = 0; c < d; c++) oi[c] = 0.0f;
            /* one pass: the running maximum m and the sum l of exp(score - m), the output
             * accumulated unnormalised and rescaled whenever m grows */
            float m = -INFINITY, l = 0.0f;
            for (int j = 0; j < nk; j++) {
                if (causal && k_pos[j] > q_pos[i]) continue;
                const float *kj = k + ((size_t)j * Hkv + kh) * d, *vj = v + ((size_t)j * Hkv + kh) * d;
                float dot = 0.0f;
                for (int c = 0; c < d; c++) dot += qi[c] * kj[c];
                float sc = scale * dot, mn = fmaxf(m, sc), r = expf(m - mn), p = expf(sc - mn);
                l = l * r + p;
                for (int c = 0; c < d; c++) oi[c] = oi[c] * r + p * vj[c];
                m = mn;
            }
            if (l > 0.0f) {
                float inv = 1.0f / l;
                for (int c = 0; c < d; c++) oi[c] *= inv;
                lse[row] = m + logf(l);
            } else {
                lse[row] = -INFINITY;
            }
        }
}

void kern_flash_merge_ref(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows,
                          int d) {
    for (int r = 0; r < rows; r++) {
        float a = lse[r], b = lse_blk[r];
        float *oi = o + (size_t)r * d;
        const float *bi = o_blk + (size_t)r * d;
        if (b == -INFINITY) continue;
        if (a == -INFINITY) {
            for (int c = 0; c < d; c++) oi[c] = bi[c];
            lse[r] = b;
            continue;
        }
        float m = fmaxf(a, b), wa = expf(a - m), wb = expf(b - m), sum = wa + wb, inv = 1.0f / sum;
        for (int c = 0; c < d; c++) oi[c] = (wa * oi[c] + wb * bi[c]) * inv;
        lse[r] = m + logf(sum);
    }
}

void kern_flash_block_backward_ref(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                   const float *o, const float *lse, const float *dout, const int *q_pos,
                                   const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale) {
    int group = Hkv > 0 ? H / Hkv : 1;
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < H; h++) {
            size_t row = (size_t)i * H + h;
            const float *qi = q + row * d, *oi = o + row * d, *gi = dout + row * d;
            float *dqi = dq + row * d, L = lse[row];
            if (L == -INFINITY) continue; /* the row saw no key anywhere: no gradient */
            int kh = h / group;
            float D = 0.0f;
            for (int c = 0; c < d; c++) D += gi[c] * oi[c];
            for (int j = 0; j < nk; j++) {
                if (causal && k_pos[j] > q_pos[i]) continue;
                size_t kr = ((size_t)j * Hkv + kh) * d;
                const float *kj = k + kr, *vj = v + kr;
                float dot = 0.0f, dp = 0.0f;
                for (int c = 0; c < d; c++) dot += qi[c] * kj[c], dp += gi[c] * vj[c];
                float p = expf(scale * dot - L), ds = p * (dp - D) * scale;
                for (int c = 0; c < d; c++) {
                    dqi[c] += ds * kj[c];
                    dk[kr + c] += ds * qi[c];
                    dv[kr + c] += p * gi[c];
                }
            }
        }
}

double kern_flash_pair_flops(int d) { return 4.0 * d + 2 * KERN_TRANSCENDENTAL; }

void kern_flash_block_cost(int nq, int nk, int H, int Hkv, int d, double *bytes, double *flops) {
    /* q and o once, k and v once per query head group sharing them (as a tile in shared
     * memory would), lse and the positions; a dot product, two exps and the rescaled
     * accumulation per pair */
    *bytes = 4.0 * ((double)nq * H * (2.0 * d + 1) + (double)nk * Hkv * 2.0 * d + nq + nk);
    *flops = (double)nq * nk * H * kern_flash_pair_flops(d);
}

double kern_flash_backward_pair_flops(int d) { return 10.0 * d + KERN_TRANSCENDENTAL + 3; }

void kern_flash_backward_cost(int nq, int nk, int H, int Hkv, int d, double *bytes, double *flops) {
    /* q, o, dout read and dq read and written, lse; k, v read and dk, dv read and written
     * once per kv head; per pair two dot products, an exp and three accumulations */
    *bytes = 4.0 * ((double)nq * H * (5.0 * d + 1) + (double)nk * Hkv * 6.0 * d + nq + nk);
    *flops = (double)nq * nk * H * kern_flash_backward_pair_flops(d);
}

void kern_flash_merge_cost(int rows, int d, double *bytes, double *flops) {
    *bytes = 4.0 * rows * (3.0 * d + 3);
    *flops = (double)rows * (3.0 * d + 3 * KERN_TRANSCENDENTAL);
}

KERN_THUNK(flash_block, kern_flash_block_ref, float *, float *, const float *, const float *, const float *,
           const int *, const int *, int, int, int, int, int, int, float)
KERN_THUNK(flash_backward, kern_flash_block_backward_ref, float *, float *, float *, const float *, const float *,
           const float *, const float *, const float *, const float *, const int *, const int *, int, int, int, int,
           int, int, float)
KERN_THUNK(flash_merge, kern_flash_merge_ref, float *, float *, const float *, const float *, int, int)

void kern_flash_block(float *o, float *lse, const float *q, const float *k, const float *v, const int *q_pos,
                      const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale,
                      pl_stream *s) {
    double bytes, flops;
    kern_flash_block_cost(nq, nk, H, Hkv, d, &bytes, &flops);
    KERN_DISPATCH("flash_block", bytes, flops,
                  kern_flash_block_cuda(o, lse, q, k, v, q_pos, k_pos, nq, nk, H, Hkv, d, causal, scale, s),
                  flash_block, o, lse, q, k, v, q_pos, k_pos, nq, nk, H, Hkv, d, causal, scale);
}

void kern_flash_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d,
                      pl_stream *s) {
    double bytes, flops;
    kern_flash_merge_cost(rows, d, &bytes, &flops);
    KERN_DISPATCH("flash_merge", bytes, flops, kern_flash_merge_cuda(o, lse, o_blk, lse_blk, rows, d, s),
                  flash_merge, o, lse, o_blk, lse_blk, rows, d);
}

void kern_flash_block_backward(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                               const float *o, const float *lse, const float *dout, const int *q_pos, const int *k_pos,
                               int nq, int nk, int H, int Hkv, int d, int causal, float scale, pl_stream *s) {
    double bytes, flops;
    kern_flash_backward_cost(nq, nk, H, Hkv, d, &bytes, &flops);
    KERN_DISPATCH("flash_block_bwd", bytes, flops,
                  kern_flash_block_backward_cuda(dq, dk, dv, q, k, v, o, lse, dout, q_pos, k_pos, nq, nk, H, Hkv, d,
                                                 causal, scale, s),
                  flash_backward, dq, dk, dv, q, k, v, o, lse, dout, q_pos, k_pos, nq, nk, H, Hkv, d, causal, scale);
}
