/* pl_sym_nvshmem.cu - symmetric memory on NVSHMEM (cuda device, a GPU per rank; built only
 * where the build finds NVSHMEM: the nvidia-nvshmem-cu13 wheel that scripts/install-deps.sh
 * installs on a machine with GPUs, or NVSHMEM_HOME).
 *
 * NVSHMEM starts on the world communicator (its MPI bootstrap: PE = world rank) and every
 * call is its stream-ordered host API, so pl_sym's stream semantics are NVSHMEM's own:
 * nvshmem_malloc, nvshmemx_putmem(_nbi)_on_stream, nvshmemx_putmem_signal_on_stream,
 * nvshmemx_signal_op_on_stream, nvshmemx_signal_wait_until_on_stream,
 * nvshmemx_quiet_on_stream, nvshmemx_barrier_all_on_stream, nvshmem_ptr.
 */
/* the C API only: Open MPI's C++ bindings would come with mpi.h here and warn */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "pl_backend.h"     // defines: struct pl_stream (native stream)
#include "pl_cuda_check.h"  // defines: PL_CUDA_CHECK
#include "pl_sym_backend.h" // defines: pl_sym_backend, pl_sym_region, pl_sym_wire_*

static cudaStream_t native(pl_stream *s) { return s ? (cudaStream_t)s->native : (cudaStream_t)0; }
static MPI_Comm g_comm = MPI_COMM_NULL;

static int nv_cmp(pl_cmp c) {
    switch (c) {
    case PL_CMP_EQ: return NVSHMEM_CMP_EQ;
    case PL_CMP_NE: return NVSHMEM_CMP_NE;
    case PL_CMP_GT: return NVSHMEM_CMP_GT;
    case PL_CMP_GE: return NVSHMEM_CMP_GE;
    case PL_CMP_LT: return NVSHMEM_CMP_LT;
    default: return NVSHMEM_CMP_LE;
    }
}
static int nv_op(pl_sig_op op) { return op == PL_SIG_ADD ? NVSHMEM_SIGNAL_ADD : NVSHMEM_SIGNAL_SET; }

static void nv_init(void) {
    PL_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g_comm));
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    if (nvshmemx_set_attr_mpi_comm_args(&g_comm, &attr) != 0)
        pl_fatal(__FILE__, __LINE__, "nvshmemx_set_attr_mpi_comm_args", "NVSHMEM rejected the world communicator");
    /* the host library alone (no device code of ours calls NVSHMEM, so no device link) */
    if (nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_MPI_COMM, &attr) != 0)
        pl_fatal(__FILE__, __LINE__, "nvshmemx_hostlib_init_attr", "NVSHMEM did not start (NVSHMEM_DEBUG=INFO says why)");
    if (nvshmem_my_pe() != pl_rank()) pl_fatal(__FILE__, __LINE__, "nvshmem_my_pe", "PE numbering differs from the world ranks");
}

static void nv_finalize(void) {
    nvshmemx_hostlib_finalize();
    PL_MPI_CHECK(MPI_Comm_free(&g_comm));
}

static void nv_alloc(pl_sym_region *r) {
    void *base = nvshmem_malloc(r->bytes); /* collective, with a barrier */
    if (!base) pl_fatal(__FILE__, __LINE__, "nvshmem_malloc", "out of symmetric heap (raise NVSHMEM_SYMMETRIC_SIZE)");
    PL_CUDA_CHECK(cudaMemset(base, 0, r->bytes));
    PL_CUDA_CHECK(cudaDeviceSynchronize());
    for (int pe = 0; pe < pl_world(); pe++) r->peer[pe] = nvshmem_ptr(base, pe);
    nvshmem_barrier_all(); /* every copy is zeroed before anyone puts */
    r->base = base;
}

static void nv_release(pl_sym_region *r) {
    PL_CUDA_CHECK(cudaDeviceSynchronize());
    nvshmem_free(r->base); /* collective, with a barrier */
}

static void nv_put(pl_sym_region *r, size_t off, const void *src, size_t bytes, int pe, bool nbi, pl_stream *s) {
    pl_sym_wire_put(bytes);
    void *dst = (char *)r->base + off;
    if (nbi) nvshmemx_putmem_nbi_on_stream(dst, src, bytes, pe, native(s));
    else nvshmemx_putmem_on_stream(dst, src, bytes, pe, native(s));
}

static void nv_put_signal(pl_sym_region *r, size_t off, const void *src, size_t bytes, pl_sym_region *sr, size_t soff,
                          uint64_t value, pl_sig_op op, int pe, pl_stream *s) {
    pl_sym_wire_put(bytes);
    pl_sym_wire_signal();
    nvshmemx_putmem_signal_on_stream((char *)r->base + off, src, bytes, (uint64_t *)((char *)sr->base + soff), value,
                                     nv_op(op), pe, native(s));
}

static void nv_signal(pl_sym_region *sr, size_t soff, uint64_t value, pl_sig_op op, int pe, pl_stream *s) {
    pl_sym_wire_signal();
    nvshmemx_signal_op_on_stream((uint64_t *)((char *)sr->base + soff), value, nv_op(op), pe, native(s));
}

static void nv_wait_until(pl_sym_region *sr, size_t soff, pl_cmp cmp, uint64_t value, pl_stream *s) {
    pl_sym_wire_wait();
    nvshmemx_signal_wait_until_on_stream((uint64_t *)((char *)sr->base + soff), nv_cmp(cmp), value, native(s));
}

static void nv_fence(pl_stream *s) {
    /* the stream-ordered host API already delivers one stream's puts in order; a fence
     * between streams needs both of them drained */
    (void)s;
    pl_device_sync();
}

static void nv_quiet(pl_stream *s) { nvshmemx_quiet_on_stream(native(s)); }

static void nv_barrier(pl_stream *s) {
    pl_sym_wire_barrier();
    nvshmemx_barrier_all_on_stream(native(s)); /* includes a quiet */
}

extern "C" const pl_sym_backend pl_sym_nvshmem = {
    "nvshmem", nv_init, nv_finalize, nv_alloc, nv_release, nv_put, nv_put_signal,
    nv_signal, nv_wait_until, nv_fence, nv_quiet, nv_barrier,
};
