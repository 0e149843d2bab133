/* pl_device_cuda.cu - the cuda device backend: GPU memory, cuBLAS GEMM, small elementwise
 * kernels, streams and events on the CUDA runtime, NVTX regions.
 *
 * The generic layer (pl_device.c) validates arguments, records instrumentation and
 * dispatches here, so every function below just moves bytes or launches work. Also here:
 * pl_cuda_probe (may `auto` pick cuda?) and the device descriptions Lab 0 prints.
 */
#ifndef PL_HAVE_CUDA
#define PL_HAVE_CUDA 1 /* this file is only built with CUDA; exposes the cuda declarations */
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>          // defines: cublasHandle_t, cublasSgemm
#include <cuda_runtime.h>       // defines: cudaMalloc, streams, events, device queries
#include <nvtx3/nvToolsExt.h>   // defines: nvtxRangePushA, nvtxRangePop (header-only)

#include "pl_backend.h"    // defines: pl_device_backend, struct pl_stream/pl_event
#include "pl_cuda_check.h" // defines: PL_CUDA_CHECK, PL_CUBLAS_CHECK, PL_CUDA_KERNEL_CHECK
#include "pl_cuda_info.h"  // defines: pl_cuda_versions, pl_cuda_device_describe, ...
#include "pl_instrument.h" // defines: pl_watchdog_poll

/* ================================================================================== */
/* State                                                                              */
/* ================================================================================== */

static struct {
    int sm_count;        /* sizes the grids of the elementwise kernels      */
    cublasHandle_t blas; /* one handle per rank; bound to a stream per call */
} pl_cuda_state = {0, NULL};

enum { PL_CUDA_THREADS = 256 };

/* The CUDA stream behind a harness stream. Before the generic layer has created its
 * streams (during init) the legacy default stream is used. */
static cudaStream_t pl_cuda_stream_of(pl_stream *s) {
    s = pl_stream_resolve(s);
    return s ? (cudaStream_t)s->native : (cudaStream_t)0;
}

/* Host-side wait for everything issued on a stream. Polls instead of calling
 * cudaStreamSynchronize so that an armed comm watchdog gets to run: on NCCL, a receive
 * nobody sends shows up as a stream that never finishes, which would otherwise block this
 * rank forever, silently. Short waits (the common case) spin; long ones sleep a little so
 * ranks sharing cores can progress. */
static void pl_cuda_wait(cudaStream_t st) {
    for (int spins = 0;;) {
        cudaError_t rc = cudaStreamQuery(st);
        if (rc == cudaSuccess) return;
        if (rc != cudaErrorNotReady)
            pl_fatal(__FILE__, __LINE__, "cudaStreamQuery(stream)", cudaGetErrorString(rc));
        pl_watchdog_poll();
        if (spins < 2000) {
            spins++;
        } else {
            struct timespec nap = {0, 20000}; /* 20 us */
            nanosleep(&nap, NULL);
        }
    }
}

/* Enough blocks to fill every SM several times over; the grid-stride loops cover the
 * rest, so huge counts never overflow the grid limit. */
static unsigned pl_cuda_blocks(size_t n) {
    size_t blocks = (n + PL_CUDA_THREADS - 1) / PL_CUDA_THREADS;
    size_t cap = (size_t)(pl_cuda_state.sm_count > 0 ? pl_cuda_state.sm_count : 1) * 32;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* ================================================================================== */
/* Kernels                                                                            */
/* ================================================================================== */

static __global__ void pl_fill_kernel(float *p, float v, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* dst[i] = dst[i] op src[i]; PL_AVG adds like PL_SUM (the caller divides). Max is written
 * exactly as the cpu backend writes it, not fmaxf, so both give the same bits for NaN and
 * signed zeros: a poisoned (NaN) dst stays NaN and is caught by the checks. */
static __global__ void pl_reduce_kernel(float *dst, const float *src, size_t n, bool take_max) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = take_max ? (src[i] > dst[i] ? src[i] : dst[i]) : dst[i] + src[i];
}

static __global__ void pl_scale_kernel(float *p, float alpha, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] *= alpha;
}

/* ================================================================================== */
/* Init and memory                                                                    */
/* ================================================================================== */

static void pl_cuda_init(pl_runtime_info *info) {
    int count = 0;
    PL_CUDA_CHECK(cudaGetDeviceCount(&count));
    PL_CHECK(count > 0, "no CUDA device visible");
    /* Ranks on a host take GPUs round robin; more ranks than GPUs share them (row 2 of
     * the design table), which works with the mpi comm backend only. */
    int dev = info->local_rank % count;
    PL_CUDA_CHECK(cudaSetDevice(dev));
    PL_CUDA_CHECK(cudaFree(0)); /* create the context now: a broken GPU fails here */
    info->cuda_device = dev;
    PL_CUDA_CHECK(cudaDeviceGetAttribute(&pl_cuda_state.sm_count,
                                         cudaDevAttrMultiProcessorCount, dev));

    /* A build without code for this GPU only fails at the first launch, with a cryptic
     * "invalid device function"; ask now and say what to do. */
    cudaFuncAttributes attr;
    cudaError_t rc = cudaFuncGetAttributes(&attr, pl_fill_kernel);
    if (rc != cudaSuccess) {
        int major = 0, minor = 0;
        cudaGetLastError();
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
        char why[200];
        snprintf(why, sizeof why,
                 "%s: this build has no kernels for compute capability %d.%d; rebuild with "
                 "nvcc -gencode arch=compute_%d%d,code=sm_%d%d",
                 cudaGetErrorString(rc), major, minor, major, minor, major, minor);
        pl_fatal(__FILE__, __LINE__, "cudaFuncGetAttributes(&attr, pl_fill_kernel)", why);
    }

    PL_CUBLAS_CHECK(cublasCreate(&pl_cuda_state.blas));
    /* FP32 by default, so GEMMs match the cpu backend to fp32 rounding. TF32 tensor cores
     * are much faster on Ampere and later, at ~1e-3 relative error: opt-in. */
    bool use_tf32 = pl_info()->tf32 != 0; /* decided in pl_init (PL_TF32=1) */
    PL_CUBLAS_CHECK(cublasSetMathMode(pl_cuda_state.blas, use_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                   : CUBLAS_DEFAULT_MATH));
    if (use_tf32) pl_log0("cuBLAS GEMMs use TF32 tensor cores (PL_TF32=1), not exact fp32");
}

static void pl_cuda_finalize(void) {
    if (pl_cuda_state.blas) PL_CUBLAS_CHECK(cublasDestroy(pl_cuda_state.blas));
    pl_cuda_state.blas = NULL;
    /* No cudaDeviceReset: NCCL communicators and other libraries may still hold the
     * context until the process exits. */
}

static void *pl_cuda_malloc(size_t bytes) {
    void *p = NULL;
    /* cudaMalloc(0) may hand back NULL; one byte gives a distinct, freeable pointer (the
     * allocation is rounded up to 256 bytes anyway). */
    cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
    if (rc == cudaErrorMemoryAllocation) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError(); /* out of memory is not sticky: clear it and say how much */
        cudaMemGetInfo(&free_b, &total_b);
        char why[160];
        snprintf(why, sizeof why,
                 "out of device memory: asked for %.3f GiB, %.3f of %.3f GiB free",
                 (double)bytes / 1073741824.0, (double)free_b / 1073741824.0,
                 (double)total_b / 1073741824.0);
        pl_fatal(__FILE__, __LINE__, "cudaMalloc(&p, bytes)", why);
    }
    PL_CUDA_CHECK(rc);
    return p;
}

static void pl_cuda_free(void *p) { PL_CUDA_CHECK(cudaFree(p)); }

/* Synchronous copies between host and device. cudaMemcpy runs on the legacy default
 * stream, which does not wait for our non-blocking streams: pl_upload/pl_download
 * synchronise both harness streams before calling these, and the mpi comm backend syncs
 * the stream it stages from, so no kernel can still be using the buffer. */
static void pl_cuda_upload(void *dst, const void *src, size_t bytes) {
    PL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    /* From pageable memory cudaMemcpy may return once the data is staged, before the DMA
     * lands; our streams do not wait for the legacy stream, so wait for it here: the
     * caller's next kernel (on any stream) must see the uploaded bytes. */
    PL_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

static void pl_cuda_download(void *dst, const void *src, size_t bytes) {
    PL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static void pl_cuda_copy(void *dst, const void *src, size_t bytes, pl_stream *s) {
    PL_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, pl_cuda_stream_of(s)));
}

static void pl_cuda_memset(void *p, int byte, size_t bytes, pl_stream *s) {
    PL_CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, pl_cuda_stream_of(s)));
}

/* ================================================================================== */
/* Elementwise operations and GEMM                                                    */
/* ================================================================================== */

static void pl_cuda_fill(float *p, float v, size_t n, pl_stream *s) {
    if (n == 0) return; /* a zero-block grid is a launch error */
    cudaStream_t st = pl_cuda_stream_of(s);
    pl_fill_kernel<<<pl_cuda_blocks(n), PL_CUDA_THREADS, 0, st>>>(p, v, n);
    PL_CUDA_KERNEL_CHECK();
}

static void pl_cuda_reduce_local(float *dst, const float *src, size_t n, pl_op op,
                                 pl_stream *s) {
    if (n == 0) return;
    cudaStream_t st = pl_cuda_stream_of(s);
    pl_reduce_kernel<<<pl_cuda_blocks(n), PL_CUDA_THREADS, 0, st>>>(dst, src, n, op == PL_MAX);
    PL_CUDA_KERNEL_CHECK();
}

static void pl_cuda_scale(float *p, float alpha, size_t n, pl_stream *s) {
    if (n == 0) return;
    cudaStream_t st = pl_cuda_stream_of(s);
    pl_scale_kernel<<<pl_cuda_blocks(n), PL_CUDA_THREADS, 0, st>>>(p, alpha, n);
    PL_CUDA_KERNEL_CHECK();
}

/* Row-major C[m x n] = alpha op(A) op(B) + beta C on column-major cuBLAS. A row-major
 * matrix read as column-major is its transpose, so we ask cuBLAS for
 *   C^T[n x m] = op(B)^T op(A)^T,
 * i.e. swap the operands (and m with n) and keep each transpose flag with its operand.
 * The leading dimensions (row strides) carry over unchanged. */
static void pl_cuda_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc,
                         pl_stream *s) {
    PL_CUBLAS_CHECK(cublasSetStream(pl_cuda_state.blas, pl_cuda_stream_of(s)));
    PL_CUBLAS_CHECK(cublasSgemm(pl_cuda_state.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, B, ldb, A, lda,
                                &beta, C, ldc));
}

/* ================================================================================== */
/* Streams, events, regions                                                           */
/* ================================================================================== */

static void pl_cuda_stream_create(pl_stream *s) {
    int least = 0, greatest = 0;
    PL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    /* Non-blocking: work on the legacy default stream (a library's, a stray cudaMemcpy)
     * must not serialise our two streams. The comm stream gets the highest priority so a
     * communication kernel is scheduled as soon as SMs free up, not after a long queue of
     * compute blocks: that is what lets communication overlap compute. */
    cudaStream_t st;
    PL_CUDA_CHECK(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking,
                                               s->id == 1 ? greatest : least));
    s->native = st;
}

static void pl_cuda_stream_destroy(pl_stream *s) {
    if (s->native) PL_CUDA_CHECK(cudaStreamDestroy((cudaStream_t)s->native));
    s->native = NULL;
}

static void pl_cuda_stream_sync(pl_stream *s) { pl_cuda_wait((cudaStream_t)s->native); }

/* cudaSuccess: done; cudaErrorNotReady: still running; anything else is a real error
 * (often a kernel that faulted earlier on this stream). */
static bool pl_cuda_done(cudaError_t rc, const char *stmt) {
    if (rc == cudaSuccess) return true;
    if (rc == cudaErrorNotReady) return false;
    pl_fatal(__FILE__, __LINE__, stmt, cudaGetErrorString(rc));
}

static bool pl_cuda_stream_query(pl_stream *s) {
    return pl_cuda_done(cudaStreamQuery((cudaStream_t)s->native), "cudaStreamQuery(s->native)");
}

static void pl_cuda_event_create(pl_event *e) {
    cudaEvent_t ev;
    PL_CUDA_CHECK(cudaEventCreate(&ev)); /* with timing: pl_event_elapsed_ms needs it */
    e->native = ev;
}

static void pl_cuda_event_destroy(pl_event *e) {
    if (e->native) PL_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e->native));
    e->native = NULL;
}

static void pl_cuda_event_record(pl_event *e, pl_stream *s) {
    PL_CUDA_CHECK(cudaEventRecord((cudaEvent_t)e->native, pl_cuda_stream_of(s)));
}

static void pl_cuda_stream_wait_event(pl_stream *s, pl_event *e) {
    PL_CUDA_CHECK(cudaStreamWaitEvent(pl_cuda_stream_of(s), (cudaEvent_t)e->native, 0));
}

static bool pl_cuda_event_query(pl_event *e) {
    return pl_cuda_done(cudaEventQuery((cudaEvent_t)e->native), "cudaEventQuery(e->native)");
}

static float pl_cuda_event_elapsed_ms(pl_event *a, pl_event *b) {
    float ms = 0.0f;
    PL_CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)a->native, (cudaEvent_t)b->native));
    return ms;
}

static void pl_cuda_region_begin(const char *name) { nvtxRangePushA(name); }
static void pl_cuda_region_end(void) { nvtxRangePop(); }

extern "C" const pl_device_backend pl_device_cuda = {
    .name = "cuda",
    .init = pl_cuda_init,
    .finalize = pl_cuda_finalize,
    .malloc = pl_cuda_malloc,
    .free = pl_cuda_free,
    .upload = pl_cuda_upload,
    .download = pl_cuda_download,
    .copy = pl_cuda_copy,
    .memset = pl_cuda_memset,
    .fill = pl_cuda_fill,
    .reduce_local = pl_cuda_reduce_local,
    .scale = pl_cuda_scale,
    .gemm = pl_cuda_gemm,
    .stream_create = pl_cuda_stream_create,
    .stream_destroy = pl_cuda_stream_destroy,
    .stream_sync = pl_cuda_stream_sync,
    .stream_query = pl_cuda_stream_query,
    .event_create = pl_cuda_event_create,
    .event_destroy = pl_cuda_event_destroy,
    .event_record = pl_cuda_event_record,
    .stream_wait_event = pl_cuda_stream_wait_event,
    .event_query = pl_cuda_event_query,
    .event_elapsed_ms = pl_cuda_event_elapsed_ms,
    .region_begin = pl_cuda_region_begin,
    .region_end = pl_cuda_region_end,
};

/* ================================================================================== */
/* Probing and describing (never abort: `auto` and Lab 0 use them to decide and report) */
/* ================================================================================== */

/* Append printf-style text to a fixed buffer, truncating quietly. */
typedef struct {
    char *buf;
    size_t len, used;
} pl_text;

__attribute__((format(printf, 2, 3)))
static void pl_text_add(pl_text *t, const char *fmt, ...) {
    if (!t->buf || t->len == 0 || t->used >= t->len - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
    va_end(ap);
    if (n > 0) t->used += (size_t)n < t->len - t->used ? (size_t)n : t->len - t->used - 1;
}

static pl_text pl_text_start(char *buf, size_t len) {
    pl_text t = {buf, len, 0};
    if (buf && len) buf[0] = '\0';
    return t;
}

/* CUDA encodes versions as 1000 * major + 10 * minor. */
static void pl_cuda_version_text(pl_text *t, int v) {
    pl_text_add(t, "%d.%d", v / 1000, (v % 1000) / 10);
}

extern "C" void pl_cuda_versions(char *buf, size_t len) {
    int driver = 0, runtime = 0;
    pl_text t = pl_text_start(buf, len);
    /* Both leave 0 behind when they cannot tell (no driver installed). */
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    cudaGetLastError();
    pl_text_add(&t, "driver ");
    if (driver) pl_cuda_version_text(&t, driver);
    else pl_text_add(&t, "none");
    pl_text_add(&t, ", runtime ");
    pl_cuda_version_text(&t, runtime);
}

extern "C" int pl_cuda_probe(char *why, size_t why_len) {
    int driver = 0, runtime = 0, count = 0;
    pl_text t = pl_text_start(why, why_len);
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    cudaGetLastError(); /* leave no error behind for the first checked call */
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (!visible) visible = "unset";

    switch (rc) {
    case cudaSuccess: break;
    case cudaErrorInsufficientDriver:
        if (driver == 0) {
            pl_text_add(&t, "no NVIDIA driver found (libcuda.so cannot be loaded); install the "
                            "driver or use --device cpu");
        } else {
            pl_text_add(&t, "CUDA driver version is insufficient: driver supports CUDA ");
            pl_cuda_version_text(&t, driver);
            pl_text_add(&t, ", this build needs runtime ");
            pl_cuda_version_text(&t, runtime);
            pl_text_add(&t, " - update the NVIDIA driver or build with an older toolkit");
        }
        return -1;
    case cudaErrorNoDevice:
        pl_text_add(&t, "no CUDA device visible (CUDA_VISIBLE_DEVICES=%s)", visible);
        return -1;
    case cudaErrorStubLibrary:
        pl_text_add(&t, "only the toolkit's stub libcuda.so was found, not a real NVIDIA "
                        "driver (a container without GPU access?)");
        return -1;
    case cudaErrorSystemDriverMismatch:
        pl_text_add(&t, "the NVIDIA kernel module and user-space driver versions differ; "
                        "reboot or reinstall the driver");
        return -1;
    case cudaErrorSystemNotReady:
        pl_text_add(&t, "the GPU system is not ready (on NVSwitch machines, is "
                        "nvidia-fabricmanager running?)");
        return -1;
    case cudaErrorCompatNotSupportedOnDevice:
        pl_text_add(&t, "CUDA forward-compatibility libraries are in use, but this GPU does "
                        "not support them");
        return -1;
    case cudaErrorDevicesUnavailable:
        pl_text_add(&t, "every CUDA device is busy or unavailable (exclusive compute mode, "
                        "in use by another process?)");
        return -1;
    default:
        pl_text_add(&t, "CUDA initialisation failed: %s (%s)", cudaGetErrorString(rc),
                    cudaGetErrorName(rc));
        return -1;
    }

    /* Devices an administrator marked "prohibited" cannot take a context. */
    int usable = 0;
    for (int d = 0; d < count; d++) {
        int mode = cudaComputeModeDefault;
        if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d) == cudaSuccess &&
            mode != cudaComputeModeProhibited)
            usable++;
    }
    cudaGetLastError();
    if (usable == 0) {
        if (count == 0)
            pl_text_add(&t, "no CUDA device visible (CUDA_VISIBLE_DEVICES=%s)", visible);
        else
            pl_text_add(&t, "all %d CUDA devices are in prohibited compute mode", count);
        return -1;
    }
    pl_text_add(&t, "%d usable CUDA device%s (", usable, usable == 1 ? "" : "s");
    pl_cuda_versions(t.buf + t.used, t.len - t.used);
    t.used += strlen(t.buf + t.used);
    pl_text_add(&t, ")");
    return usable;
}

extern "C" int pl_cuda_device_describe(int dev, char *buf, size_t len) {
    pl_text t = pl_text_start(buf, len);
    cudaDeviceProp p;
    cudaError_t rc = cudaGetDeviceProperties(&p, dev);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        pl_text_add(&t, "device %d: %s", dev, cudaGetErrorString(rc));
        return -1;
    }
    char pci[32] = "?";
    if (cudaDeviceGetPCIBusId(pci, sizeof pci, dev) != cudaSuccess) {
        cudaGetLastError();
        snprintf(pci, sizeof pci, "?");
    }
    pl_text_add(&t, "%s, %.1f GiB, %d SMs, compute capability %d.%d, PCI %s", p.name,
                (double)p.totalGlobalMem / 1073741824.0, p.multiProcessorCount, p.major,
                p.minor, pci);
    return 0;
}

extern "C" int pl_cuda_link_matrix(char *buf, size_t len) {
    pl_text t = pl_text_start(buf, len);
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        pl_text_add(&t, "cannot list GPUs: %s", cudaGetErrorString(rc));
        return -1;
    }
    pl_text_add(&t, "%-8s", "");
    for (int j = 0; j < count; j++) pl_text_add(&t, "GPU%-5d", j);
    pl_text_add(&t, "PCI bus\n");
    for (int i = 0; i < count; i++) {
        pl_text_add(&t, "GPU%-5d", i);
        for (int j = 0; j < count; j++) {
            int can = 0, rank = 0;
            if (i == j) {
                pl_text_add(&t, "%-8s", "X");
                continue;
            }
            if (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess) can = 0;
            if (can && cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j) !=
                           cudaSuccess)
                rank = -1;
            cudaGetLastError();
            char cell[16];
            if (!can) snprintf(cell, sizeof cell, "SYS");
            else if (rank < 0) snprintf(cell, sizeof cell, "P2P");
            else snprintf(cell, sizeof cell, "P2P:%d", rank);
            pl_text_add(&t, "%-8s", cell);
        }
        char pci[32] = "?";
        if (cudaDeviceGetPCIBusId(pci, sizeof pci, i) != cudaSuccess) {
            cudaGetLastError();
            snprintf(pci, sizeof pci, "?");
        }
        pl_text_add(&t, "%s\n", pci);
    }
    pl_text_add(&t, "Legend: X = self; P2P:r = direct peer access (NVLink or PCIe), r = CUDA's "
                    "relative link performance rank, lower is faster; SYS = no peer access, "
                    "copies go through host memory\n");
    return count;
}
