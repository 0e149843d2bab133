/* kern_gqa.cu - KV-cache store and grouped-query causal attention, CUDA version (same
 * arguments as the reference in kern_gqa.c, device pointers). */
#include "kern_gqa.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, kern_warp_sum, kern_warp_max

#include <math.h>

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* A thread per element of the new k and v; consecutive threads write consecutive floats
 * of one cache row. */
static __global__ void kv_store_kernel(float *k_cache, float *v_cache, const float *k, const float *v,
                                       const int *seq_id, const int *pos, int n_tokens, int row,
                                       int n_seq_max, int n_ctx) {
    size_t n = (size_t)n_tokens * row;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(i / row), e = (int)(i % row), sq = seq_id[t], p = pos[t];
        if (sq < 0 || sq >= n_seq_max || p < 0 || p >= n_ctx) continue;
        size_t dst = ((size_t)sq * n_ctx + p) * row + e;
        k_cache[dst] = k[i];
        v_cache[dst] = v[i];
    }
}

/* One block per (token, query head), GQA_THREADS threads, in three phases over the
 * positions 0 .. L-1 (L = pos + 1) of the token's sequence:
 *   1. scores: warp w takes positions w, w + warps, ...; its lanes read one key row
 *      (head_dim contiguous floats: coalesced) and reduce the dot product with shuffles;
 *      the scores go to shared memory (n_ctx floats) and each warp keeps its maximum;
 *   2. the block's maximum, then e^(score - max) in place and their sum;
 *   3. out: the threads form G = threads / head_dim groups of head_dim lanes; group g sums
 *      weight * value over positions g, g + G, ... (lane d reads column d: coalesced),
 *      and the G partial rows are added in shared memory.
 * Heads of one group read the same K and V rows, mostly from L2. */
#define GQA_THREADS 128
#define GQA_WARPS (GQA_THREADS / 32)

static __global__ void __launch_bounds__(GQA_THREADS)
gqa_attention_kernel(float *out, const float *q, const float *k_cache, const float *v_cache,
                     const int *seq_id, const int *pos, int n_heads, int n_kv_heads, int head_dim,
                     int n_seq_max, int n_ctx, float scale) {
    extern __shared__ float smem[];
    float *sq = smem;                /* [head_dim]      this head's query          */
    float *sc = sq + head_dim;       /* [n_ctx]         scores, then their weights */
    float *red = sc + n_ctx;         /* [GQA_THREADS]   reductions, partial rows   */
    int t = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    float *o = out + ((size_t)t * n_heads + h) * head_dim;
    int seq = seq_id[t], p = pos[t];
    if (seq < 0 || seq >= n_seq_max || p < 0 || p >= n_ctx) { /* the same for the whole block */
        for (int d = tid; d < head_dim; d += GQA_THREADS) o[d] = 0.0f;
        return;
    }
    const float *qh = q + ((size_t)t * n_heads + h) * head_dim;
    for (int d = tid; d < head_dim; d += GQA_THREADS) sq[d] = qh[d];
    __syncthreads();

    size_t row = (size_t)n_kv_heads * head_dim;
    size_t base = (size_t)seq * n_ctx * row + (size_t)(h / (n_heads / n_kv_heads)) * head_dim;
    const float *K = k_cache + base, *V = v_cache + base;
    int L = p + 1;

    float mx = -INFINITY;
    for (int j = warp; j < L; j += GQA_WARPS) {
        const float *kj = K + (size_t)j * row;
        float dot = 0.0f;
        for (int d = lane; d < head_dim; d += 32) dot += sq[d] * kj[d];
        dot = scale * kern_warp_sum(dot);
        if (lane == 0) sc[j] = dot;
        mx = fmaxf(mx, dot);
    }
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < GQA_WARPS; w++) mx = fmaxf(mx, red[w]);
    __syncthreads(); /* everyone has read red before it is reused */

    float sum = 0.0f;
    for (int j = tid; j < L; j += GQA_THREADS) {
        float e = expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    sum = kern_warp_sum(sum);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < GQA_WARPS; w++) total += red[w];
    __syncthreads();

    int groups = GQA_THREADS / head_dim, g = tid / head_dim, d = tid % head_dim;
    if (groups >= 1) {
        float acc = 0.0f;
        if (g < groups)
            for (int j = g; j < L; j += groups) acc += sc[j] * V[(size_t)j * row + d];
        red[tid] = acc;
        __syncthreads();
        if (tid < head_dim) {
            float s = 0.0f;
            for (int k = 0; k < groups; k++) s += red[k * head_dim + tid];
            o[tid] = s / total;
        }
    } else { /* head_dim > GQA_THREADS: each thread owns several columns */
        for (int c = tid; c < head_dim; c += GQA_THREADS) {
            float acc = 0.0f;
            for (int j = 0; j < L; j++) acc += sc[j] * V[(size_t)j * row + c];
            o[c] = acc / total;
        }
    }
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_kv_store_cuda(float *k_cache, float *v_cache, const float *k, const float *v,
                        const int *seq_id, const int *pos, int n_tokens, int n_kv_heads,
                        int head_dim, int n_seq_max, int n_ctx, pl_stream *s) {
    size_t n = (size_t)n_tokens * n_kv_heads * head_dim;
    if (n == 0) return;
    kv_store_kernel<<<kern_blocks(n, 256), 256, 0, kern_native(s)>>>(k_cache, v_cache, k, v, seq_id, pos,
                                                                    n_tokens, n_kv_heads * head_dim,
                                                                    n_seq_max, n_ctx);
    PL_CUDA_KERNEL_CHECK();
}

void kern_gqa_attention_forward_cuda(float *out, const float *q, const float *k_cache,
                                     const float *v_cache, const int *seq_id, const int *pos,
                                     int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                     int n_seq_max, int n_ctx, float scale, pl_stream *s) {
    if (n_tokens <= 0 || n_heads <= 0 || head_dim <= 0) return;
    PL_CHECK(head_dim <= 256, "the CUDA attention kernel takes head_dim <= 256");
    PL_CHECK((long long)n_tokens * n_heads <= 0x7fffffffLL, "too many (token, head) pairs for one grid");
    size_t smem = ((size_t)head_dim + n_ctx + GQA_THREADS) * sizeof(float);
    if (smem > 48 * 1024) {
        /* past the default, a block may ask for more shared memory where the GPU has it */
        int dev = 0, optin = 0;
        PL_CUDA_CHECK(cudaGetDevice(&dev));
        PL_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        PL_CHECK(smem <= (size_t)optin, "n_ctx too large: the attention scores do not fit in shared memory");
        PL_CUDA_CHECK(cudaFuncSetAttribute(gqa_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
    }
    gqa_attention_kernel<<<(unsigned)(n_tokens * n_heads), GQA_THREADS, smem, kern_native(s)>>>(
        out, q, k_cache, v_cache, seq_id, pos, n_heads, n_kv_heads, head_dim, n_seq_max, n_ctx, scale);
    PL_CUDA_KERNEL_CHECK();
}
