/* pl_sym_cuda.cu - symmetric memory on the cuda device without NVSHMEM: CUDA IPC.
 *
 * Each allocation is a cudaMalloc of every rank, exported with cudaIpcGetMemHandle and
 * opened by every other rank of the node, so every rank holds a device pointer to every
 * copy (pl_sym_peer_ptr works, and a put is a stream-ordered device-to-device copy into
 * the peer's copy). Signals are one-thread kernels: a system-scope fence, then an atomic
 * exchange or add on the peer's word; a wait is a kernel that spins on the local word, so
 * later work on the stream starts only after it. This is what several ranks sharing one
 * GPU can do (NVSHMEM needs MPS for that), and all of it on one node.
 *
 * A spinning wait that is never satisfied would hang the GPU: it gives up after the
 * watchdog's limit, prints the watchdog's line from the device and traps, so the job ends
 * with the deadlock diagnosed instead of hanging.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "pl_backend.h"     // defines: struct pl_stream (native stream)
#include "pl_cuda_check.h"  // defines: PL_CUDA_CHECK, PL_CUDA_KERNEL_CHECK
#include "pl_instrument.h"  // defines: pl_host_allgatherv, pl_host_allreduce
#include "pl_sym_backend.h" // defines: pl_sym_backend, pl_sym_region, pl_sym_wire_*

static cudaStream_t native(pl_stream *s) { return s ? (cudaStream_t)s->native : (cudaStream_t)0; }

static void host_barrier(void) {
    double x = 0;
    pl_host_allreduce(&x, 1, PL_HOST_SUM, NULL);
}

/* ---- kernels ----------------------------------------------------------------------------- */

static __global__ void signal_kernel(unsigned long long *word, unsigned long long value, int add) {
    __threadfence_system(); /* what this stream wrote before is visible first */
    if (add) atomicAdd(word, value);
    else atomicExch(word, value);
    __threadfence_system();
}

static __device__ bool holds(unsigned long long have, int cmp, unsigned long long want) {
    switch (cmp) {
    case PL_CMP_EQ: return have == want;
    case PL_CMP_NE: return have != want;
    case PL_CMP_GT: return have > want;
    case PL_CMP_GE: return have >= want;
    case PL_CMP_LT: return have < want;
    default: return have <= want;
    }
}

static __device__ unsigned long long now_ns(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void wait_kernel(const volatile unsigned long long *word, int cmp, unsigned long long want,
                                   unsigned long long limit_ns, int rank) {
    unsigned long long t0 = now_ns();
    while (!holds(*word, cmp, want)) {
        if (limit_ns && now_ns() - t0 > limit_ns) {
            printf("[rank %d] rank %d waits in sym wait_until (on the device, %.1f s): deadlock? aborting\n", rank,
                   rank, (double)limit_ns * 1e-9);
            __trap();
        }
    }
    __threadfence_system(); /* later reads on this stream see what came before the signal */
}

/* ---- the backend ------------------------------------------------------------------------- */

typedef struct {
    void *dev;
} ipc_state;

static void ipc_init(void) {}
static void ipc_finalize(void) {}

static void ipc_alloc(pl_sym_region *r) {
    int n = pl_world(), me = pl_rank();
    void *base = NULL;
    PL_CUDA_CHECK(cudaMalloc(&base, r->bytes));
    PL_CUDA_CHECK(cudaMemset(base, 0, r->bytes));
    PL_CUDA_CHECK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t mine;
    PL_CUDA_CHECK(cudaIpcGetMemHandle(&mine, base));
    cudaIpcMemHandle_t *all = (cudaIpcMemHandle_t *)pl_host_allgatherv(&mine, sizeof mine, NULL, NULL);
    for (int pe = 0; pe < n; pe++) {
        if (pe == me) {
            r->peer[pe] = base;
            continue;
        }
        void *p = NULL;
        PL_CUDA_CHECK(cudaIpcOpenMemHandle(&p, all[pe], cudaIpcMemLazyEnablePeerAccess));
        r->peer[pe] = p;
    }
    free(all);
    ipc_state *st = (ipc_state *)calloc(1, sizeof *st);
    PL_CHECK(st != NULL, "out of host memory");
    st->dev = base;
    r->base = base;
    r->native = st;
    host_barrier(); /* every copy is zeroed and mapped before anyone puts */
}

static void ipc_release(pl_sym_region *r) {
    PL_CUDA_CHECK(cudaDeviceSynchronize());
    host_barrier(); /* nobody still writes into this rank's copy */
    for (int pe = 0; pe < pl_world(); pe++)
        if (pe != pl_rank() && r->peer[pe]) PL_CUDA_CHECK(cudaIpcCloseMemHandle(r->peer[pe]));
    host_barrier(); /* every mapping of this rank's copy is gone */
    PL_CUDA_CHECK(cudaFree(((ipc_state *)r->native)->dev));
    free(r->native);
    r->native = NULL;
}

static void ipc_put(pl_sym_region *r, size_t off, const void *src, size_t bytes, int pe, bool nbi, pl_stream *s) {
    (void)nbi; /* a stream-ordered copy either way */
    pl_sym_wire_put(bytes);
    PL_CUDA_CHECK(cudaMemcpyAsync((char *)r->peer[pe] + off, src, bytes, cudaMemcpyDefault, native(s)));
}

static void ipc_signal(pl_sym_region *sr, size_t soff, uint64_t value, pl_sig_op op, int pe, pl_stream *s) {
    pl_sym_wire_signal();
    unsigned long long *word = (unsigned long long *)((char *)sr->peer[pe] + soff);
    signal_kernel<<<1, 1, 0, native(s)>>>(word, (unsigned long long)value, op == PL_SIG_ADD);
    PL_CUDA_KERNEL_CHECK();
}

static void ipc_put_signal(pl_sym_region *r, size_t off, const void *src, size_t bytes, pl_sym_region *sr,
                           size_t soff, uint64_t value, pl_sig_op op, int pe, pl_stream *s) {
    ipc_put(r, off, src, bytes, pe, false, s); /* the stream orders the copy before the signal */
    ipc_signal(sr, soff, value, op, pe, s);
}

static void ipc_wait_until(pl_sym_region *sr, size_t soff, pl_cmp cmp, uint64_t value, pl_stream *s) {
    pl_sym_wire_wait();
    const unsigned long long *word = (const unsigned long long *)((char *)sr->base + soff);
    double limit = pl_info()->watchdog_sec;
    wait_kernel<<<1, 1, 0, native(s)>>>(word, (int)cmp, (unsigned long long)value,
                                        limit > 0 ? (unsigned long long)(limit * 1e9) : 0ull, pl_rank());
    PL_CUDA_KERNEL_CHECK();
}

static void ipc_fence(pl_stream *s) { (void)s; /* copies on one stream arrive in order */ }

static void ipc_quiet(pl_stream *s) {
    (void)s;
    pl_device_sync(); /* puts issued on either stream have landed */
}

static void ipc_barrier(pl_stream *s) {
    pl_sym_wire_barrier();
    ipc_quiet(s);
    host_barrier();
}

extern "C" const pl_sym_backend pl_sym_cuda_ipc = {
    "cuda-ipc", ipc_init, ipc_finalize, ipc_alloc, ipc_release, ipc_put, ipc_put_signal,
    ipc_signal, ipc_wait_until, ipc_fence, ipc_quiet, ipc_barrier,
};
