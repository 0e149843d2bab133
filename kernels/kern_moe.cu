/* kern_moe.cu - a mixture-of-experts layer's token moves, CUDA versions (same arguments as
 * the references in kern_moe.c, device pointers). All three are bandwidth-bound row copies;
 * a thread per element, consecutive threads on consecutive floats of a row. */
#include "kern_moe.h"
#include "kern_warp.cuh" // defines: kern_native, kern_blocks, kern_warp_sum, PL_CUDA_KERNEL_CHECK

/* ================================================================================== */
/* Kernels                                                                             */
/* ================================================================================== */

static __global__ void scatter_kernel(float *rows, const float *x, const int *slot, const float *scale, int T, int k,
                                      int H) {
    size_t total = (size_t)T * k * H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t a = i / H, c = i % H; /* assignment a = t*k + j */
        int r = slot[a];
        if (r < 0) continue;
        rows[(size_t)r * H + c] = (scale ? scale[a] : 1.0f) * x[(a / k) * H + c];
    }
}

/* j in order from 0, as the reference adds them. */
static __global__ void gather_kernel(float *out, const float *rows, const int *slot, const float *weight, int T, int k,
                                     int H) {
    size_t total = (size_t)T * H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / H, c = i % H;
        float acc = 0;
        for (int j = 0; j < k; j++) {
            int r = slot[t * k + j];
            if (r >= 0) acc += (weight ? weight[t * k + j] : 1.0f) * rows[(size_t)r * H + c];
        }
        out[i] = acc;
    }
}

/* A warp per assignment: lanes stride over the row, then a shuffle sum. */
static __global__ void rowdot_kernel(float *dot, const float *a, const float *rows, const int *slot, int T, int k,
                                     int H) {
    size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= (size_t)T * k) return;
    int r = slot[warp];
    float acc = 0;
    for (size_t c = lane; r >= 0 && c < (size_t)H; c += 32) acc += a[(warp / k) * H + c] * rows[(size_t)r * H + c];
    acc = kern_warp_sum(acc);
    if (lane == 0) dot[warp] = acc;
}

/* ================================================================================== */
/* Launchers                                                                           */
/* ================================================================================== */

void kern_moe_scatter_cuda(float *rows, const float *x, const int *slot, const float *scale, int T, int k, int H,
                           pl_stream *s) {
    size_t total = (size_t)T * k * H;
    if (total == 0) return;
    scatter_kernel<<<kern_blocks(total, 256), 256, 0, kern_native(s)>>>(rows, x, slot, scale, T, k, H);
    PL_CUDA_KERNEL_CHECK();
}

void kern_moe_gather_cuda(float *out, const float *rows, const int *slot, const float *weight, int T, int k, int H,
                          pl_stream *s) {
    size_t total = (size_t)T * H;
    if (total == 0) return;
    gather_kernel<<<kern_blocks(total, 256), 256, 0, kern_native(s)>>>(out, rows, slot, weight, T, k, H);
    PL_CUDA_KERNEL_CHECK();
}

void kern_moe_rowdot_cuda(float *dot, const float *a, const float *rows, const int *slot, int T, int k, int H,
                          pl_stream *s) {
    size_t warps = (size_t)T * k;
    if (warps == 0) return;
    rowdot_kernel<<<(unsigned)((warps * 32 + 255) / 256), 256, 0, kern_native(s)>>>(dot, a, rows, slot, T, k, H);
    PL_CUDA_KERNEL_CHECK();
}
