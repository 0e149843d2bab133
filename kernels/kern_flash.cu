/* kern_flash.cu - block attention with its log-sum-exp, its backward, and the merge, CUDA
 * versions (same arguments as the references in kern_flash.c, device pointers). One warp
 * per (query, head) row: the lanes split the head dimension, the warp walks the keys with
 * the online softmax, each lane rescaling its own part of the output row. The backward
 * adds each row's share of dk and dv with atomics (rows of one kv head meet there), so its
 * sums may differ from run to run in the last bits. */
#include "kern_flash.h"
#include "kern_warp.cuh" // defines: kern_native, kern_warp_sum, PL_CUDA_KERNEL_CHECK

#include <math.h>

static __global__ void flash_block_kernel(float *o, float *lse, const float *q, const float *k, const float *v,
                                          const int *q_pos, const int *k_pos, int nq, int nk, int H, int Hkv,
                                          int d, int causal, float scale) {
    long row = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= (long)nq * H) return;
    int i = (int)(row / H), h = (int)(row % H), kh = h / (H / Hkv);
    const float *qi = q + row * d;
    float *oi = o + row * d;
    for (int c = lane; c < d; c += 32) oi[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int qp = q_pos[i];
    for (int j = 0; j < nk; j++) {
        if (causal && k_pos[j] > qp) continue;
        const float *kj = k + ((long)j * Hkv + kh) * d, *vj = v + ((long)j * Hkv + kh) * d;
        float part = 0.0f;
        for (int c = lane; c < d; c += 32) part += qi[c] * kj[c];
        float sc = scale * kern_warp_sum(part), mn = fmaxf(m, sc), r = expf(m - mn), p = expf(sc - mn);
        l = l * r + p;
        for (int c = lane; c < d; c += 32) oi[c] = oi[c] * r + p * vj[c];
        m = mn;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int c = lane; c < d; c += 32) oi[c] *= inv;
    if (lane == 0) lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
}

static __global__ void flash_merge_kernel(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows,
                                          int d) {
    long r = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    float a = lse[r], b = lse_blk[r];
    float *oi = o + r * d;
    const float *bi = o_blk + r * d;
    if (b == -INFINITY) return;
    float wa, wb, nl;
    if (a == -INFINITY) {
        wa = 0.0f, wb = 1.0f, nl = b;
    } else {
        float m = fmaxf(a, b), ea = expf(a - m), eb = expf(b - m), sum = ea + eb;
        wa = ea / sum, wb = eb / sum, nl = m + logf(sum);
    }
    for (int c = lane; c < d; c += 32) oi[c] = wa * oi[c] + wb * bi[c];
    __syncwarp();
    if (lane == 0) lse[r] = nl;
}

static __global__ void flash_backward_kernel(float *dq, float *dk, float *dv, const float *q, const float *k,
                                             const float *v, const float *o, const float *lse, const float *dout,
                                             const int *q_pos, const int *k_pos, int nq, int nk, int H, int Hkv, int d,
                                             int causal, float scale) {
    long row = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= (long)nq * H) return;
    int i = (int)(row / H), h = (int)(row % H), kh = h / (H / Hkv);
    float L = lse[row];
    if (L == -INFINITY) return;
    const float *qi = q + row * d, *oi = o + row * d, *gi = dout + row * d;
    float *dqi = dq + row * d;
    float part = 0.0f;
    for (int c = lane; c < d; c += 32) part += gi[c] * oi[c];
    float D = kern_warp_sum(part);
    int qp = q_pos[i];
    for (int j = 0; j < nk; j++) {
        if (causal && k_pos[j] > qp) continue;
        long kr = ((long)j * Hkv + kh) * d;
        float a = 0.0f, b = 0.0f;
        for (int c = lane; c < d; c += 32) a += qi[c] * k[kr + c], b += gi[c] * v[kr + c];
        float dot = kern_warp_sum(a), dp = kern_warp_sum(b);
        float p = expf(scale * dot - L), ds = p * (dp - D) * scale;
        for (int c = lane; c < d; c += 32) {
            dqi[c] += ds * k[kr + c];
            atomicAdd(dk + kr + c, ds * qi[c]);
            atomicAdd(dv + kr + c, p * gi[c]);
        }
    }
}

void kern_flash_block_backward_cuda(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                    const float *o, const float *lse, const float *dout, const int *q_pos,
                                    const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale,
                                    pl_stream *s) {
    long rows = (long)nq * H;
    if (rows <= 0 || nk <= 0) return;
    const int warps = 8;
    flash_backward_kernel<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, kern_native(s)>>>(
        dq, dk, dv, q, k, v, o, lse, dout, q_pos, k_pos, nq, nk, H, Hkv, d, causal, scale);
    PL_CUDA_KERNEL_CHECK();
}

void kern_flash_block_cuda(float *o, float *lse, const float *q, const float *k, const float *v, const int *q_pos,
                           const int *k_pos, int nq, int nk, int H, int Hkv, int d, int causal, float scale,
                           pl_stream *s) {
    long rows = (long)nq * H;
    if (rows <= 0) return;
    const int warps = 8;
    flash_block_kernel<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, kern_native(s)>>>(
        o, lse, q, k, v, q_pos, k_pos, nq, nk, H, Hkv, d, causal, scale);
    PL_CUDA_KERNEL_CHECK();
}

void kern_flash_merge_cuda(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d,
                           pl_stream *s) {
    if (rows <= 0) return;
    const int warps = 8;
    flash_merge_kernel<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, kern_native(s)>>>(o, lse, o_blk,
                                                                                             lse_blk, rows, d);
    PL_CUDA_KERNEL_CHECK();
}
