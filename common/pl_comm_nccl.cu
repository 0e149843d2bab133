/* pl_comm_nccl.cu - the nccl comm backend: point-to-point and collectives with NCCL on the
 * harness streams, NCCL communicators bootstrapped over MPI.
 *
 * The generic layer (pl_comm.c) validates arguments, records instrumentation and
 * dispatches here. NCCL operations are asynchronous: each call only enqueues work on a
 * CUDA stream, so nothing here waits on the host except communicator set-up and teardown.
 * Waiting (and the watchdog) happens in the generic stream/event waits, which should also
 * call pl_nccl_check_async(), because NCCL reports a dead peer or a network failure only
 * asynchronously. Requires the cuda device backend (buffers are device pointers).
 */
#ifndef PL_HAVE_CUDA
#define PL_HAVE_CUDA 1 /* this file is only built with CUDA and NCCL */
#endif
#ifndef PL_HAVE_NCCL
#define PL_HAVE_NCCL 1
#endif

/* The C API only: Open MPI's (and MPICH's) deprecated C++ bindings would otherwise come in
 * with mpi.h here, need libmpi_cxx, and warn under -Wextra. */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1

#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h> // defines: cudaStream_t, cudaMallocAsync, cudaFreeAsync
#include <mpi.h>          // defines: MPI_Comm, MPI_Bcast
#include <nccl.h>         // defines: ncclComm_t, ncclSend/ncclRecv, the collectives

#include "pl_backend.h"    // defines: pl_comm_backend, struct pl_comm, pl_stream_resolve
#include "pl_cuda_check.h" // defines: PL_CUDA_CHECK, PL_NCCL_CHECK
#include "pl_cuda_info.h"  // defines: pl_nccl_version, pl_nccl_check_async
#include "pl_internal.h"   // defines: pl_wire_p2p, pl_wire_coll (what went to NCCL)

/* ================================================================================== */
/* State                                                                              */
/* ================================================================================== */

/* Every communicator this rank created and has not destroyed: the world and the splits.
 * abort and the asynchronous error check must reach all of them. A lab makes a handful
 * (TP, PP and DP groups), so a small fixed table is plenty. */
enum { PL_NCCL_MAX_COMMS = 64, PL_NCCL_MAX_DEFERRED = 64 };
static ncclComm_t pl_nccl_live[PL_NCCL_MAX_COMMS];
static int pl_nccl_nlive;

/* Scratch buffers of in-place all-to-alls issued inside an open group. NCCL enqueues the
 * sends that read them only when the outermost group ends, so they are freed then. */
static struct {
    void *p;
    cudaStream_t stream;
} pl_nccl_deferred[PL_NCCL_MAX_DEFERRED];
static int pl_nccl_ndeferred;
static int pl_nccl_group_depth;

static void pl_nccl_register(ncclComm_t nc) {
    PL_CHECK(pl_nccl_nlive < PL_NCCL_MAX_COMMS, "too many live NCCL communicators (max 64)");
    pl_nccl_live[pl_nccl_nlive++] = nc;
}

static void pl_nccl_unregister(ncclComm_t nc) {
    for (int i = 0; i < pl_nccl_nlive; i++) {
        if (pl_nccl_live[i] != nc) continue;
        pl_nccl_live[i] = pl_nccl_live[--pl_nccl_nlive];
        return;
    }
}

static ncclComm_t pl_nccl_of(pl_comm *c) { return (ncclComm_t)c->backend; }

static cudaStream_t pl_nccl_stream(pl_stream *s) {
    s = pl_stream_resolve(s);
    return s ? (cudaStream_t)s->native : (cudaStream_t)0;
}

static ncclRedOp_t pl_nccl_op(pl_op op) {
    switch (op) {
    case PL_SUM: return ncclSum;
    case PL_MAX: return ncclMax;
    case PL_AVG: return ncclAvg;
    }
    pl_fatal(__FILE__, __LINE__, "pl_nccl_op(op)", "unknown reduction operator");
}

/* ================================================================================== */
/* Communicators                                                                      */
/* ================================================================================== */

/* Collective over c->mpi: rank 0 of c makes the NCCL id, MPI carries it to the others,
 * then all of them join. ncclCommInitRank blocks until every member has joined. */
static void pl_nccl_create(pl_comm *c) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) PL_NCCL_CHECK(ncclGetUniqueId(&id));
    PL_MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, (MPI_Comm)c->mpi));
    ncclComm_t nc;
    PL_NCCL_CHECK(ncclCommInitRank(&nc, c->size, id, c->rank));
    pl_nccl_register(nc);
    c->backend = nc;
}

static void pl_nccl_init(pl_comm *world) {
    /* NCCL binds a communicator to the current CUDA device, set by the device backend. */
    PL_CHECK(pl_info()->cuda_device >= 0, "the nccl comm backend needs --device cuda");
    pl_nccl_create(world);
}

/* A split: c->mpi, rank and size are set. Making a fresh id over the split's MPI
 * communicator needs nothing from the parent, unlike ncclCommSplit. */
static void pl_nccl_comm_init(pl_comm *c) { pl_nccl_create(c); }

static void pl_nccl_comm_free(pl_comm *c) {
    ncclComm_t nc = pl_nccl_of(c);
    if (!nc) return;
    pl_nccl_unregister(nc);
    /* Destroy finalizes first (flushes this rank's pending operations on it). */
    PL_NCCL_CHECK(ncclCommDestroy(nc));
    c->backend = NULL;
}

static void pl_nccl_free_deferred(void) {
    for (int i = 0; i < pl_nccl_ndeferred; i++)
        PL_CUDA_CHECK(cudaFreeAsync(pl_nccl_deferred[i].p, pl_nccl_deferred[i].stream));
    pl_nccl_ndeferred = 0;
}

static void pl_nccl_finalize(void) {
    pl_nccl_free_deferred();
    /* Communicators the program did not free, newest first (the world last). */
    while (pl_nccl_nlive > 0) PL_NCCL_CHECK(ncclCommDestroy(pl_nccl_live[--pl_nccl_nlive]));
}

/* After the watchdog fired or an asynchronous error: stop whatever is still running on
 * the GPU so the process can exit. Errors are ignored; the job is going down anyway. */
static void pl_nccl_abort(void) {
    while (pl_nccl_nlive > 0) (void)ncclCommAbort(pl_nccl_live[--pl_nccl_nlive]);
    pl_nccl_ndeferred = 0;
}

/* ================================================================================== */
/* Point-to-point and groups                                                          */
/* ================================================================================== */

static void pl_nccl_group_start(void) {
    PL_NCCL_CHECK(ncclGroupStart());
    pl_nccl_group_depth++;
}

static void pl_nccl_group_end(void) {
    PL_NCCL_CHECK(ncclGroupEnd());
    if (--pl_nccl_group_depth == 0) pl_nccl_free_deferred();
}

static void pl_nccl_send(const float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    pl_wire_p2p(1, count * sizeof(float));
    PL_NCCL_CHECK(ncclSend(buf, count, ncclFloat, peer, pl_nccl_of(c), pl_nccl_stream(s)));
}

static void pl_nccl_recv(float *buf, size_t count, int peer, pl_comm *c, pl_stream *s) {
    pl_wire_p2p(0, count * sizeof(float));
    PL_NCCL_CHECK(ncclRecv(buf, count, ncclFloat, peer, pl_nccl_of(c), pl_nccl_stream(s)));
}

/* ================================================================================== */
/* Collectives (NCCL handles sendbuf == recvbuf for all of these but all-to-all)      */
/* ================================================================================== */

static void pl_nccl_allreduce(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c,
                              pl_stream *s) {
    pl_wire_coll(n * sizeof(float));
    PL_NCCL_CHECK(ncclAllReduce(sb, rb, n, ncclFloat, pl_nccl_op(op), pl_nccl_of(c),
                                pl_nccl_stream(s)));
}

static void pl_nccl_allgather(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * sizeof(float));
    PL_NCCL_CHECK(ncclAllGather(sb, rb, n, ncclFloat, pl_nccl_of(c), pl_nccl_stream(s)));
}

static void pl_nccl_reduce_scatter(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c,
                                   pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * sizeof(float));
    PL_NCCL_CHECK(ncclReduceScatter(sb, rb, n, ncclFloat, pl_nccl_op(op), pl_nccl_of(c),
                                    pl_nccl_stream(s)));
}

static void pl_nccl_broadcast(const float *sb, float *rb, size_t n, int root, pl_comm *c,
                              pl_stream *s) {
    pl_wire_coll(n * sizeof(float));
    PL_NCCL_CHECK(ncclBroadcast(sb, rb, n, ncclFloat, root, pl_nccl_of(c), pl_nccl_stream(s)));
}

static void pl_nccl_reduce(const float *sb, float *rb, size_t n, pl_op op, int root, pl_comm *c,
                           pl_stream *s) {
    pl_wire_coll(n * sizeof(float));
    PL_NCCL_CHECK(ncclReduce(sb, rb, n, ncclFloat, pl_nccl_op(op), root, pl_nccl_of(c),
                             pl_nccl_stream(s)));
}

/* All-to-all as one group of a send and a receive per peer (self included), which every
 * NCCL version supports. */
static void pl_nccl_alltoall(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * sizeof(float));
    ncclComm_t nc = pl_nccl_of(c);
    cudaStream_t st = pl_nccl_stream(s);
    const float *src = sb;
    void *scratch = NULL;
    if (sb == rb) {
        if (c->size == 1) return; /* the only block stays where it is */
        /* In place, the receive from peer j would overwrite block j while the send to
         * peer j may still be reading it: send from a copy. Stream-ordered allocation
         * keeps the call asynchronous. */
        size_t bytes = n * (size_t)c->size * sizeof(float);
        PL_CUDA_CHECK(cudaMallocAsync(&scratch, bytes, st));
        PL_CUDA_CHECK(cudaMemcpyAsync(scratch, sb, bytes, cudaMemcpyDeviceToDevice, st));
        src = (const float *)scratch;
    }
    PL_NCCL_CHECK(ncclGroupStart());
    for (int peer = 0; peer < c->size; peer++) {
        PL_NCCL_CHECK(ncclSend(src + (size_t)peer * n, n, ncclFloat, peer, nc, st));
        PL_NCCL_CHECK(ncclRecv(rb + (size_t)peer * n, n, ncclFloat, peer, nc, st));
    }
    PL_NCCL_CHECK(ncclGroupEnd());
    if (!scratch) return;
    if (pl_nccl_group_depth == 0) {
        PL_CUDA_CHECK(cudaFreeAsync(scratch, st)); /* after the sends, in stream order */
    } else {
        PL_CHECK(pl_nccl_ndeferred < PL_NCCL_MAX_DEFERRED,
                 "too many in-place all-to-alls inside one group (max 64)");
        pl_nccl_deferred[pl_nccl_ndeferred].p = scratch;
        pl_nccl_deferred[pl_nccl_ndeferred].stream = st;
        pl_nccl_ndeferred++;
    }
}

/* bfloat16 words as ncclBfloat16: NCCL adds in float32 and rounds at each step. */
static void pl_nccl_allgather_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * 2);
    PL_NCCL_CHECK(ncclAllGather(sb, rb, n, ncclBfloat16, pl_nccl_of(c), pl_nccl_stream(s)));
}

static void pl_nccl_reduce_scatter_bf16(const uint16_t *sb, uint16_t *rb, size_t n, pl_op op, pl_comm *c,
                                        pl_stream *s) {
    pl_wire_coll(n * (size_t)c->size * 2);
    PL_NCCL_CHECK(ncclReduceScatter(sb, rb, n, ncclBfloat16, pl_nccl_op(op), pl_nccl_of(c), pl_nccl_stream(s)));
}

static void pl_nccl_poll(void) { (void)pl_nccl_check_async(); }

extern "C" const pl_comm_backend pl_comm_nccl = {
    .name = "nccl",
    .init = pl_nccl_init,
    .finalize = pl_nccl_finalize,
    .comm_init = pl_nccl_comm_init,
    .comm_free = pl_nccl_comm_free,
    .group_start = pl_nccl_group_start,
    .group_end = pl_nccl_group_end,
    .send = pl_nccl_send,
    .recv = pl_nccl_recv,
    .allreduce = pl_nccl_allreduce,
    .allgather = pl_nccl_allgather,
    .reduce_scatter = pl_nccl_reduce_scatter,
    .broadcast = pl_nccl_broadcast,
    .reduce = pl_nccl_reduce,
    .alltoall = pl_nccl_alltoall,
    .drain = NULL, /* operations are ordered on their CUDA streams; nothing to complete */
    .test = NULL,       /* deferred streams are the cpu device's only */
    .group_post = NULL,
    .poll = pl_nccl_poll,
    .abort = pl_nccl_abort,
    .allgather_bf16 = pl_nccl_allgather_bf16,
    .reduce_scatter_bf16 = pl_nccl_reduce_scatter_bf16,
    /* communicators and host collectives: the generic layer's MPI */
    .split = NULL,
    .release = NULL,
    .barrier = NULL,
    .host_allreduce = NULL,
    .host_gatherv = NULL,
    .host_bcast = NULL,
};

/* ================================================================================== */
/* Versions and asynchronous errors                                                   */
/* ================================================================================== */

extern "C" void pl_nccl_version(char *buf, size_t len) {
    if (!buf || len == 0) return;
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(buf, len, "NCCL (version unknown)");
        return;
    }
    /* Since 2.9 versions are encoded as 10000 * major + 100 * minor + patch. */
    int n = snprintf(buf, len, "NCCL %d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    if (v != NCCL_VERSION_CODE && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " (built with %d.%d.%d)", NCCL_MAJOR, NCCL_MINOR,
                 NCCL_PATCH);
}

extern "C" int pl_nccl_check_async(void) {
    for (int i = 0; i < pl_nccl_nlive; i++) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t rc = ncclCommGetAsyncError(pl_nccl_live[i], &async);
        if (rc != ncclSuccess) async = rc;
        /* ncclInProgress only means a non-blocking call is still under way. */
        if (async == ncclSuccess || async == ncclInProgress) continue;
        /* Take the reason before aborting, which may replace NCCL's last error. */
        char why[512];
        snprintf(why, sizeof why, "%s", pl_nccl_reason(async));
        pl_nccl_abort();
        pl_fatal(__FILE__, __LINE__, "ncclCommGetAsyncError(comm, &async)", why);
    }
    return 0;
}
