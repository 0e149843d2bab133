/* kern_layernorm.cu - layer normalisation, CUDA version (same arguments as the reference
 * in kern_layernorm.c, device pointers). */
#include <stdint.h> // defines: uintptr_t (alignment checks)

#include "kern_layernorm.h"
#include "kern_warp.cuh" // defines: kern_native, kern_warp_sum, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

/* One warp per row. The generic kernels read the row from L1/L2 again for each pass; the
 * register kernels (C a multiple of 4, at most 128 * KERN_LN_MAXV) load it once as float4
 * into registers, so DRAM sees one read and one write per element. */
#define KERN_LN_MAXV 8

static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *inp, const float *weight,
                                                const float *bias, int N, int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += x[c];
    float m = kern_warp_sum(sum) / (float)C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) var += (x[c] - m) * (x[c] - m);
    float r = rsqrtf(kern_warp_sum(var) / (float)C + eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

template <int V>
static __global__ void layernorm_forward_reg_kernel(float *out, float *mean, float *rstd,
                                                    const float *inp, const float *weight,
                                                    const float *bias, int N, int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    int C4 = C / 4;
    const float4 *x = reinterpret_cast<const float4 *>(inp + (size_t)row * C);
    float4 v[V];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) {
        int i = lane + 32 * k;
        v[k] = i < C4 ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    float m = kern_warp_sum(sum) / (float)C, var = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++)
        if (lane + 32 * k < C4) {
            float a = v[k].x - m, b = v[k].y - m, c = v[k].z - m, d = v[k].w - m;
            var += (a * a + b * b) + (c * c + d * d);
        }
    float r = rsqrtf(kern_warp_sum(var) / (float)C + eps);
    float4 *o = reinterpret_cast<float4 *>(out + (size_t)row * C);
    const float4 *w4 = reinterpret_cast<const float4 *>(weight), *b4 = reinterpret_cast<const float4 *>(bias);
#pragma unroll
    for (int k = 0; k < V; k++) {
        int i = lane + 32 * k;
        if (i < C4) {
            float4 w = w4[i], b = b4[i], y;
            y.x = (v[k].x - m) * r * w.x + b.x;
            y.y = (v[k].y - m) * r * w.y + b.y;
            y.z = (v[k].z - m) * r * w.z + b.z;
            y.w = (v[k].w - m) * r * w.w + b.w;
            o[i] = y;
        }
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

static __global__ void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                             const float *weight, const float *mean,
                                             const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    float m = mean[row], r = rstd[row], g_sum = 0.0f, gx_sum = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = dy[c] * weight[c];
        g_sum += g;
        gx_sum += g * (x[c] - m) * r;
    }
    float g_mean = kern_warp_sum(g_sum) / (float)C, gx_mean = kern_warp_sum(gx_sum) / (float)C;
    float *dx = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (x[c] - m) * r;
        dx[c] = r * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
    }
}

template <int V>
static __global__ void layernorm_dinp_reg_kernel(float *dinp, const float *dout, const float *inp,
                                                 const float *weight, const float *mean,
                                                 const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    int C4 = C / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(inp + (size_t)row * C);
    const float4 *dy4 = reinterpret_cast<const float4 *>(dout + (size_t)row * C);
    const float4 *w4 = reinterpret_cast<const float4 *>(weight);
    float m = mean[row], r = rstd[row], g_sum = 0.0f, gx_sum = 0.0f;
    float4 xh[V], g[V]; /* xhat and dy * weight of our columns */
#pragma unroll
    for (int k = 0; k < V; k++) {
        int i = lane + 32 * k;
        if (i < C4) {
            float4 x = x4[i], dy = dy4[i], w = w4[i];
            xh[k] = make_float4((x.x - m) * r, (x.y - m) * r, (x.z - m) * r, (x.w - m) * r);
            g[k] = make_float4(dy.x * w.x, dy.y * w.y, dy.z * w.z, dy.w * w.w);
            g_sum += (g[k].x + g[k].y) + (g[k].z + g[k].w);
            gx_sum += (g[k].x * xh[k].x + g[k].y * xh[k].y) + (g[k].z * xh[k].z + g[k].w * xh[k].w);
        }
    }
    float g_mean = kern_warp_sum(g_sum) / (float)C, gx_mean = kern_warp_sum(gx_sum) / (float)C;
    float4 *dx = reinterpret_cast<float4 *>(dinp + (size_t)row * C);
#pragma unroll
    for (int k = 0; k < V; k++) {
        int i = lane + 32 * k;
        if (i < C4)
            dx[i] = make_float4(r * (g[k].x - g_mean - xh[k].x * gx_mean), r * (g[k].y - g_mean - xh[k].y * gx_mean),
                                r * (g[k].z - g_mean - xh[k].z * gx_mean), r * (g[k].w - g_mean - xh[k].w * gx_mean));
    }
}

/* dweight/dbias in two deterministic steps (no atomics). Step 1: block (x, y) owns 32
 * columns (coalesced reads across threadIdx.x) and the y-th slice of the rows, split again
 * over threadIdx.y stripes and summed in shared memory; it writes one partial per column.
 * Step 2 adds the slices' partials in a fixed order into dweight and dbias. The slices give
 * the GPU enough blocks when C is small (C = 768: 24 column blocks alone). */
#define LN_COLS 32
#define LN_STRIPES 16
#define LN_MAX_SLICES 64
static __global__ void layernorm_dparams_partial_kernel(float *pw, float *pb, const float *dout,
                                                        const float *inp, const float *mean,
                                                        const float *rstd, int N, int C,
                                                        int rows_per_slice) {
    __shared__ float sw[LN_STRIPES][LN_COLS], sb[LN_STRIPES][LN_COLS];
    int c = blockIdx.x * LN_COLS + threadIdx.x;
    int r0 = blockIdx.y * rows_per_slice, r1 = min(N, r0 + rows_per_slice);
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int i = r0 + threadIdx.y; i < r1; i += LN_STRIPES) {
            float dy = dout[(size_t)i * C + c];
            aw += dy * (inp[(size_t)i * C + c] - mean[i]) * rstd[i];
            ab += dy;
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int k = 1; k < LN_STRIPES; k++) {
            aw += sw[k][threadIdx.x];
            ab += sb[k][threadIdx.x];
        }
        pw[(size_t)blockIdx.y * C + c] = aw;
        pb[(size_t)blockIdx.y * C + c] = ab;
    }
}

static __global__ void layernorm_dparams_finish_kernel(float *dweight, float *dbias, const float *pw,
                                                       const float *pb, int C, int slices) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float aw = 0.0f, ab = 0.0f;
    for (int k = 0; k < slices; k++) {
        aw += pw[(size_t)k * C + c];
        ab += pb[(size_t)k * C + c];
    }
    dweight[c] += aw;
    dbias[c] += ab;
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

/* Registers per lane for a row of C floats, or 0 when the generic kernel must run. */
static int ln_vectors(const void *a, const void *b, int C) {
    if (C % 4 || C > 128 * KERN_LN_MAXV) return 0;
    if (((uintptr_t)a | (uintptr_t)b) % 16) return 0;
    return (C / 4 + 31) / 32;
}

#define LN_LAUNCH_REG(kernel, V, grid, block, stream, ...)                          \
    switch (V) {                                                                          \
    case 1: kernel<1><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    case 2: kernel<2><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    case 3: kernel<3><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    case 4: kernel<4><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    case 5: kernel<5><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    case 6: kernel<6><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    case 7: kernel<7><<<grid, block, 0, stream>>>(__VA_ARGS__); break;                \
    default: kernel<KERN_LN_MAXV><<<grid, block, 0, stream>>>(__VA_ARGS__); break;    \
    }

void kern_layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                 const float *weight, const float *bias, int N, int C,
                                 float eps, pl_stream *s) {
    if (N <= 0 || C <= 0) return;
    const int warps = 8;
    int V = ln_vectors(inp, out, C);
    if (V && ((uintptr_t)weight | (uintptr_t)bias) % 16 == 0) {
        LN_LAUNCH_REG(layernorm_forward_reg_kernel, V, (N + warps - 1) / warps, warps * 32, kern_native(s),
                      out, mean, rstd, inp, weight, bias, N, C, eps);
    } else {
        layernorm_forward_kernel<<<(N + warps - 1) / warps, warps * 32, 0, kern_native(s)>>>(
            out, mean, rstd, inp, weight, bias, N, C, eps);
    }
    PL_CUDA_KERNEL_CHECK();
}

void kern_layernorm_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, const float *mean,
                                  const float *rstd, int N, int C, pl_stream *s) {
    if (N <= 0 || C <= 0) return;
    const int warps = 8;
    cudaStream_t st = kern_native(s);
    int V = ln_vectors(inp, dout, C);
    if (V && ((uintptr_t)dinp | (uintptr_t)weight) % 16 == 0) {
        LN_LAUNCH_REG(layernorm_dinp_reg_kernel, V, (N + warps - 1) / warps, warps * 32, st,
                      dinp, dout, inp, weight, mean, rstd, N, C);
    } else {
        layernorm_dinp_kernel<<<(N + warps - 1) / warps, warps * 32, 0, st>>>(dinp, dout, inp, weight, mean,
                                                                              rstd, N, C);
    }
    PL_CUDA_KERNEL_CHECK();
    /* Enough slices that the column blocks times slices fill the GPU a few times over;
     * each slice at least 4 stripes' worth of rows. */
    int col_blocks = (C + LN_COLS - 1) / LN_COLS;
    int slices = (4 * 132 + col_blocks - 1) / col_blocks;
    int max_by_rows = (N + 4 * LN_STRIPES - 1) / (4 * LN_STRIPES);
    if (slices > max_by_rows) slices = max_by_rows;
    if (slices > LN_MAX_SLICES) slices = LN_MAX_SLICES;
    if (slices < 1) slices = 1;
    int rows_per_slice = (N + slices - 1) / slices;
    slices = (N + rows_per_slice - 1) / rows_per_slice;
    float *partial = NULL;
    PL_CUDA_CHECK(cudaMallocAsync((void **)&partial, 2 * (size_t)slices * C * sizeof(float), st));
    dim3 block(LN_COLS, LN_STRIPES), grid(col_blocks, slices);
    layernorm_dparams_partial_kernel<<<grid, block, 0, st>>>(partial, partial + (size_t)slices * C, dout, inp,
                                                             mean, rstd, N, C, rows_per_slice);
    PL_CUDA_KERNEL_CHECK();
    layernorm_dparams_finish_kernel<<<(C + 255) / 256, 256, 0, st>>>(dweight, dbias, partial,
                                                                     partial + (size_t)slices * C, C, slices);
    PL_CUDA_KERNEL_CHECK();
    PL_CUDA_CHECK(cudaFreeAsync(partial, st));
}
