/* pl_trace.h - per-rank instrumentation of every comm op and GEMM, metrics, Chrome
 * traces, named regions (NVTX on CUDA) and the comm watchdog.
 */
#ifndef PL_TRACE_H
#define PL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PL_OP_SEND = 0,
    PL_OP_RECV,
    PL_OP_ALLREDUCE,
    PL_OP_ALLGATHER,
    PL_OP_REDUCE_SCATTER,
    PL_OP_BROADCAST,
    PL_OP_REDUCE,
    PL_OP_ALLTOALL,
    PL_OP_BARRIER,
    PL_OP_GEMM,
    PL_OP_KERNEL,      /* elementwise / memory-bound device work: kernels/, copies, fills */
    PL_OP_REGION,
    PL_OP_COUNT
} pl_op_kind;

const char *pl_op_kind_name(pl_op_kind k);
static inline int pl_op_is_collective(pl_op_kind k) {
    return k >= PL_OP_ALLREDUCE && k <= PL_OP_ALLTOALL;
}

/* One recorded operation. Times are seconds since pl_init on this rank (host clock; on
 * CUDA the op's issue and completion as seen by the host). */
typedef struct {
    pl_op_kind kind;
    int stream;        /* 0 compute, 1 comm                                    */
    int peer;          /* p2p: peer rank in `comm`; collectives: root or -1    */
    int comm_id;       /* 0 for world, then one per split                      */
    int comm_size;
    uint64_t bytes;    /* p2p: message bytes; collectives: the nccl-tests S    */
    double flops;      /* GEMM and kernels: arithmetic operations              */
    double t_start, t_end;
    const char *name;  /* regions and kernels: a name (a string literal)       */
    int64_t after;     /* index in this trace of the other stream's op that this op
                          must follow (an event wait or a host sync), -1 if none;
                          set by the recorder                                    */
} pl_trace_event;

/* Counters, cumulative on this rank since pl_init or the last pl_metrics_reset(). */
typedef struct {
    uint64_t bytes_sent, bytes_recv;         /* point-to-point payload           */
    uint64_t msgs_sent, msgs_recv;
    uint64_t coll_calls[PL_OP_COUNT];        /* library collective calls by kind */
    uint64_t coll_bytes;                     /* sum of S over collective calls   */
    uint64_t coll_total;                     /* all library collective calls     */
    uint64_t gemm_calls;
    double gemm_flops;
    uint64_t kernel_calls;                   /* elementwise kernels, copies, fills */
    double kernel_bytes;                     /* bytes they read + wrote            */
    size_t mem_peak;                         /* device bytes, peak               */
} pl_metrics;

void pl_metrics_get(pl_metrics *m);
void pl_metrics_reset(void);

/* Recording: the harness calls these; labs rarely need to. */
void pl_trace_record(const pl_trace_event *e);
/* A memory-bound device operation that ran on `stream` (0 compute, 1 comm) from t_start
 * (pl_trace_clock()) until now: bytes read + written and arithmetic operations, the two
 * numbers the cost model's roofline prices (docs/cost-model.md). kernels/ and the
 * harness's copies, fills and local reductions call it. */
void pl_trace_kernel(const char *name, int stream, double bytes, double flops, double t_start);
double pl_trace_clock(void); /* seconds since pl_init, the clock of every event */
/* Cross-stream order, as a GPU would enforce it (the cost model replays it): the
 * position of the last op recorded on `stream` (for an event), that the next op on
 * `stream` must follow the op at position `pos` (an event wait), and that the host has
 * seen `stream` complete (a sync: the other stream's next op follows it too). Positions
 * survive pl_trace_clear; pl_device.c calls these, labs do not need to. */
int64_t pl_trace_stream_pos(int stream);
void pl_trace_stream_waits(int stream, int64_t pos);
void pl_trace_host_synced(int stream);
size_t pl_trace_count(void);
const pl_trace_event *pl_trace_events(void);
void pl_trace_clear(void);
/* Named phases: show in the Chrome trace and as NVTX ranges in Nsight Systems. */
void pl_region_begin(const char *name);
void pl_region_end(void);

/* Write all ranks' events as one Chrome-trace JSON (opens in Perfetto / chrome://tracing).
 * Collective over the world communicator; rank 0 writes the file. */
void pl_trace_write_chrome(const char *path);

/* Comm watchdog: a blocking wait longer than the limit prints
 *   "rank R waits in OP for peer P (for S s)"
 * and aborts the job with PL_EXIT_DEADLOCK. The harness arms it around every wait. */
void pl_watchdog_arm(const char *op, int peer);
void pl_watchdog_poll(void); /* call inside a wait loop; fires past the limit */
void pl_watchdog_disarm(void);

double pl_now(void); /* seconds, monotonic */

#ifdef __cplusplus
}
#endif

#endif
