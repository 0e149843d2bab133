/* pl_trace.h - what a lab may do with the instrumentation: name phases of its work (they
 * show in the Chrome trace and as NVTX ranges in Nsight Systems) and read the clock.
 *
 * Everything else (the record of every comm op and GEMM, the counters the grader reads, the
 * comm watchdog) belongs to the harness and the grader: common/internal/pl_instrument.h.
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
    PL_OP_PUT,         /* symmetric memory (pl_sym.h): one-sided put, signal, wait      */
    PL_OP_SIGNAL,
    PL_OP_WAIT,
    PL_OP_COUNT
} pl_op_kind;

const char *pl_op_kind_name(pl_op_kind k);
static inline int pl_op_is_collective(pl_op_kind k) {
    return k >= PL_OP_ALLREDUCE && k <= PL_OP_ALLTOALL;
}

/* Named phases: show in the Chrome trace and as NVTX ranges in Nsight Systems. */
void pl_region_begin(const char *name);
void pl_region_end(void);

double pl_now(void); /* seconds, monotonic */

#ifdef __cplusplus
}
#endif

#endif
