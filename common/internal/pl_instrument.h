/* pl_instrument.h - the harness's record of every comm op and GEMM, the counters the
 * grader reads, Chrome traces and the comm watchdog (internal: the harness, kernels/,
 * models/ and the grader's drivers use it; lab code cannot, see docs/grader.md).
 *
 * Two sets of counters, at two depths:
 *   pl_metrics  counted by the generic layer (pl_comm.c, pl_device.c) for every call of
 *               the public API: what the lab asked for;
 *   pl_wire     counted by the comm backend at the MPI / NCCL call itself: what went on
 *               the wire. It has no reset: readers take differences. A driver compares
 *               the two, so a count that does not match what moved is caught.
 */
#ifndef PL_INSTRUMENT_H
#define PL_INSTRUMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_comm.h"  // defines: pl_comm
#include "pl_trace.h" // defines: pl_op_kind

#ifdef __cplusplus
extern "C" {
#endif

/* One recorded operation. Times are seconds since pl_init on this rank (host clock; on
 * CUDA the op's issue and completion as seen by the host). */
typedef struct {
    pl_op_kind kind;
    int stream;        /* 0 compute, 1 comm                                    */
    int peer;          /* p2p: peer rank in `comm`; collectives: root or -1    */
    int comm_id;       /* 0 for world, then one per split                      */
    int comm_size;
    bool has_peer_world; /* p2p: peer_world is known (communicators of any shape)   */
    int peer_world;    /* p2p: the peer's world rank                            */
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
    double reduce_elems;                     /* elements pl_reduce_local combined  */
    size_t mem_peak;                         /* device bytes, peak               */
    uint64_t puts, put_bytes;                /* symmetric memory (pl_sym.h): puts, */
    uint64_t signals, waits, barriers;       /* signal updates, waits, barriers    */
} pl_metrics;

void pl_metrics_get(pl_metrics *m);
void pl_metrics_reset(void);

/* What the comm backend handed to MPI or NCCL on this rank since pl_init: point-to-point
 * payload and messages, and collective calls with their S. Never reset. */
typedef struct {
    uint64_t p2p_bytes_sent, p2p_msgs_sent, p2p_bytes_recv, p2p_msgs_recv;
    uint64_t coll_calls, coll_bytes;
} pl_wire;
void pl_wire_get(pl_wire *w);

/* Recording: the harness calls these. */
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
 * survive pl_trace_clear; pl_device.c calls these. */
int64_t pl_trace_stream_pos(int stream);
void pl_trace_stream_waits(int stream, int64_t pos);
void pl_trace_host_synced(int stream);
size_t pl_trace_count(void);
const pl_trace_event *pl_trace_events(void);
void pl_trace_clear(void);

/* Write all ranks' events as one Chrome-trace JSON (opens in Perfetto / chrome://tracing).
 * Collective over the world communicator; rank 0 writes the file and returns whether it
 * did (the other ranks return true). */
bool pl_trace_write_chrome(const char *path);

/* A trace file opened now, for a process that may not open files later (a refereed player
 * under its play filter): pl_trace_write_chrome(path) keeps the text in memory, the last
 * one per path, and pl_trace_flush_reserved() (pl_finalize calls it) writes each into its
 * open file, or removes the files no trace went to. false: the file cannot be created. */
bool pl_trace_reserve(const char *path);
void pl_trace_flush_reserved(void);

/* Host-side collectives that no lab's counters see: checks, timing, traces and the cost
 * model reduce or gather host values over the ranks of c (NULL: the world) through a
 * private duplicate of its communicator, so they never mix with the lab's own traffic. */
typedef enum { PL_HOST_SUM, PL_HOST_MAX, PL_HOST_MIN } pl_host_op;
void pl_host_allreduce(double *v, int n, pl_host_op op, pl_comm *c);
/* Every rank's `bytes` bytes, concatenated in rank order into a malloc'd buffer (free it);
 * counts[r] (c's size entries, may be NULL) receives rank r's byte count. */
void *pl_host_allgatherv(const void *mine, size_t bytes, size_t *counts, pl_comm *c);
/* The same, to `root` only (NULL elsewhere, counts filled on root). */
void *pl_host_gatherv(const void *mine, size_t bytes, size_t *counts, int root, pl_comm *c);
void pl_host_bcast(void *buf, size_t bytes, int root, pl_comm *c);

/* Comm watchdog: a blocking wait longer than the limit prints
 *   "rank R waits in OP for peer P (for S s)"
 * and aborts the job with PL_EXIT_DEADLOCK. The harness arms it around every wait. */
void pl_watchdog_arm(const char *op, int peer);
void pl_watchdog_poll(void); /* call inside a wait loop; fires past the limit */
void pl_watchdog_disarm(void);
/* While quiet (non-zero), pl_watchdog_arm does nothing: for waits that are not the lab's
 * (a grader's player waiting on its referees, whose computing is no rank's progress); the
 * engine's timeout alone bounds them. */
void pl_watchdog_quiet(int quiet);
/* Progress the watchdog goes by: every op recorded or completed, message received and
 * piece of deferred work run ticks. The grader's own long host work between harness calls
 * may tick too, so ranks waiting for it are never taken for deadlocked. */
void pl_progress_tick(void);

#ifdef __cplusplus
}
#endif

#endif
