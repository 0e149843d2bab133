/* pl_backend.h - the two backend tables behind the harness API (internal).
 *
 * A backend is a table of function pointers plus its private state (the ggml idea, one
 * level deep). The generic layer (pl_device.c, pl_comm.c) validates arguments, records
 * instrumentation and dispatches; a backend only moves bytes. Entries marked optional
 * may be NULL. Lab code never includes this header.
 */
#ifndef PL_BACKEND_H
#define PL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_comm.h"
#include "pl_device.h"
#include "pl_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A stream: the backend's native handle plus the bookkeeping the cpu backend needs to
 * give asynchronous communication in-order stream semantics. */
struct pl_stream {
    int id;          /* 0 compute, 1 comm */
    void *native;    /* cudaStream_t on cuda, NULL on cpu */
    uint64_t issued;    /* asynchronous ops issued on this stream (cpu + mpi)     */
    uint64_t completed; /* ... and completed, in order                            */
    double completed_at;/* host time the last one completed                       */
    bool async;         /* mpi on the cpu device: collectives on it stay in flight until
                           drained (the comm stream; every stream when deferred)   */
    /* Deferred streams (pl_device.c): work queued and not yet run, oldest first.      */
    struct pl_work *q_head, *q_tail;
    uint64_t q_enq, q_done; /* items queued and items run, in order               */
    double q_done_at;       /* host time the last one ran                          */
};

/* Communication on a communicator starts in the order it was issued, whatever order the
 * deferred streams run in, so every rank matches its messages and collectives alike. */
typedef struct pl_order {
    uint64_t issued, posted;
} pl_order;

struct pl_event {
    void *native;      /* cudaEvent_t on cuda */
    pl_stream *stream; /* cpu: stream and position recorded */
    uint64_t seq;
    double t;          /* cpu: time the stream passed the event, < 0 until then */
    int64_t trace_pos; /* the stream's last traced op when recorded (pl_trace_stream_pos) */
    bool recorded;
    bool deferred;     /* recorded on a deferred stream: seq counts its queue      */
};

struct pl_comm {
    int rank, size, id;
    void *mpi;     /* MPI_Comm (pointer-sized handle in Open MPI), owned by pl_comm.c */
    void *host;    /* a private duplicate of it for the harness's host collectives     */
    void *backend; /* ncclComm_t on nccl, NULL on mpi */
    pl_order order; /* deferred streams: the issue order of its operations      */
    int *world_of;  /* [size]: each member's world rank (MPI splits; NULL: the world
                       itself, or a transport that does not say)                 */
};

typedef struct {
    const char *name;
    /* Pick and open the device for this rank; fills info->cuda_device. */
    void (*init)(pl_runtime_info *info);
    void (*finalize)(void);
    void *(*malloc)(size_t bytes);
    void (*free)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);
    void (*download)(void *dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes, pl_stream *s);
    void (*memset)(void *p, int byte, size_t bytes, pl_stream *s);
    void (*fill)(float *p, float v, size_t n, pl_stream *s);
    void (*reduce_local)(float *dst, const float *src, size_t n, pl_op op, pl_stream *s);
    void (*scale)(float *p, float alpha, size_t n, pl_stream *s);
    void (*gemm)(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, pl_stream *s);
    /* streams/events on the native handles; optional on cpu (NULL = nothing to do) */
    void (*stream_create)(pl_stream *s);
    void (*stream_destroy)(pl_stream *s);
    void (*stream_sync)(pl_stream *s);
    bool (*stream_query)(pl_stream *s);
    void (*event_create)(pl_event *e);
    void (*event_destroy)(pl_event *e);
    void (*event_record)(pl_event *e, pl_stream *s);
    void (*stream_wait_event)(pl_stream *s, pl_event *e);
    bool (*event_query)(pl_event *e);
    float (*event_elapsed_ms)(pl_event *a, pl_event *b);
    void (*region_begin)(const char *name); /* optional: NVTX */
    void (*region_end)(void);               /* optional */
} pl_device_backend;

typedef struct {
    const char *name;
    void (*init)(pl_comm *world);      /* world->mpi is set; create backend state */
    void (*finalize)(void);
    void (*comm_init)(pl_comm *c);     /* after a split: c->mpi, rank, size are set */
    void (*comm_free)(pl_comm *c);
    void (*group_start)(void);
    void (*group_end)(void);
    void (*send)(const float *buf, size_t count, int peer, pl_comm *c, pl_stream *s);
    void (*recv)(float *buf, size_t count, int peer, pl_comm *c, pl_stream *s);
    void (*allreduce)(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s);
    void (*allgather)(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s);
    void (*reduce_scatter)(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c,
                           pl_stream *s);
    void (*broadcast)(const float *sb, float *rb, size_t n, int root, pl_comm *c, pl_stream *s);
    void (*reduce)(const float *sb, float *rb, size_t n, pl_op op, int root, pl_comm *c,
                   pl_stream *s);
    void (*alltoall)(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s);
    /* Complete this stream's pending asynchronous operations (optional). */
    void (*drain)(pl_stream *s);
    /* Deferred streams (optional; needed by PL_STREAMS=deferred): complete s's pending
     * operations if they are all done, without blocking, and say whether they were; and
     * end the outermost group leaving its operations pending on s. */
    bool (*test)(pl_stream *s);
    void (*group_post)(pl_stream *s);
    /* Check for asynchronous errors inside every wait loop (optional). */
    void (*poll)(void);
    /* Tear down after the watchdog fired, before the job is aborted (optional). */
    void (*abort)(void);
    /* bfloat16 collectives on 16-bit words, counts in elements (optional: NULL = this
     * backend has none, and the generic layer says so). */
    void (*allgather_bf16)(const uint16_t *sb, uint16_t *rb, size_t n, pl_comm *c, pl_stream *s);
    void (*reduce_scatter_bf16)(const uint16_t *sb, uint16_t *rb, size_t n, pl_op op, pl_comm *c,
                                pl_stream *s);
    /* A transport with no MPI in this process (the grader's referee transport, set with
     * pl_use_transport): communicators and the host collectives go through it as well. All
     * optional together: NULL = the generic layer uses MPI itself. split() fills rank and
     * size of *out and returns false where this rank joins no communicator. */
    bool (*split)(pl_comm *parent, int color, int key, pl_comm *out);
    void (*release)(pl_comm *c);
    void (*barrier)(pl_comm *c);
    void (*host_allreduce)(double *v, int n, int op, pl_comm *c); /* op: pl_host_op */
    void *(*host_gatherv)(const void *mine, size_t bytes, size_t *counts, int root, pl_comm *c);
    void (*host_bcast)(void *buf, size_t bytes, int root, pl_comm *c);
} pl_comm_backend;

/* Where this rank sits, for a transport that is not MPI (pl_use_transport). */
typedef struct {
    int rank, world, local_rank, local_world, nodes;
} pl_transport_place;
/* Before pl_init: use cb for every message and collective, and never start MPI (the cpu
 * device only). The grader's player calls it when its referee moves its traffic. */
void pl_use_transport(const pl_comm_backend *cb, const pl_transport_place *where);

extern const pl_device_backend pl_device_cpu;
extern const pl_comm_backend pl_comm_mpi;
#ifdef PL_HAVE_CUDA
extern const pl_device_backend pl_device_cuda;
/* Number of usable CUDA devices, or -1 with a one-line reason in `why` (e.g. the driver
 * is older than the runtime). Never aborts: `auto` uses it to decide. */
int pl_cuda_probe(char *why, size_t why_len);
void pl_cuda_versions(char *buf, size_t len); /* "driver 13.0, runtime 13.0" */
#endif
#ifdef PL_HAVE_NCCL
extern const pl_comm_backend pl_comm_nccl;
void pl_nccl_version(char *buf, size_t len);
#endif

/* The trace record of the communication being handed to the backend (pl_comm_defer.c). */
extern size_t pl_comm_current_event;

/* The backends in use (defined in pl_runtime.c, set by pl_init). */
extern const pl_device_backend *pl_dev;
extern const pl_comm_backend *pl_cb;

/* Stream lookups for backends: NULL means the compute stream. (pl_stream_ready, which
 * also completes pending communication, is public: pl_device.h.) */
pl_stream *pl_stream_resolve(pl_stream *s);

/* Error checks for backend code: print rank, file, line, the statement and the reason, and
 * abort the job. The CUDA/cuBLAS/NCCL variants live in pl_cuda_check.h (CUDA builds only). */
#define PL_MPI_CHECK(stmt)                                                        \
    do {                                                                          \
        int pl_mpi_rc_ = (stmt);                                                  \
        if (pl_mpi_rc_ != 0) pl_fatal(__FILE__, __LINE__, #stmt, pl_mpi_error_string(pl_mpi_rc_)); \
    } while (0)
const char *pl_mpi_error_string(int rc);

#ifdef __cplusplus
}
#endif

#endif
