/* pl_internal.h - hooks between the harness's own files (not for labs).
 *
 * The harness is layered; each layer calls only the ones below it:
 *   runtime    pl_runtime.c                 info, logging, errors, abort
 *   instrument pl_trace.c, pl_memstat.c     records, counters, regions, clock, watchdog
 *   device     pl_device*.c(u)              memory, streams, events, GEMM
 *   comm       pl_comm*.c(u)                communicators, p2p, collectives, host collectives
 *   top        pl_init.c, pl_check.c, pl_costmodel.c, pl_export.c, pl_rng.c
 * A lower layer that must reach a higher one at run time (the device layer completing the
 * cpu comm stream's pending operations; NVTX ranges; the watchdog aborting NCCL) is given a
 * hook by pl_init(), never a direct call.
 */
#ifndef PL_INTERNAL_H
#define PL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pl_device.h"     // defines: pl_stream
#include "pl_instrument.h" // defines: pl_trace_event

#ifdef __cplusplus
extern "C" {
#endif

/* -- instrument ---------------------------------------------------------------------- */
void pl_trace_start_clock(void);
/* Index of the event just recorded, and a way to close it when an async op completes. */
size_t pl_trace_record_open(const pl_trace_event *e);
void pl_trace_close(size_t index, double t_end);
void pl_trace_set_region_hooks(void (*begin)(const char *name), void (*end)(void));
void pl_mem_track_alloc(void *p, size_t bytes);
void pl_mem_track_free(void *p);
void pl_mem_reset_peak(void);
void pl_watchdog_start(void);
/* poll: called in every wait loop (NCCL's asynchronous errors); abort_comm: called before
 * the watchdog ends the job from the main thread. Either may be NULL. */
void pl_watchdog_set_hooks(void (*poll)(void), void (*abort_comm)(void));

/* -- device -------------------------------------------------------------------------- */
void pl_device_setup_streams(void);
void pl_device_teardown_streams(void);
/* The comm layer's way to complete what is pending on a stream (cpu + mpi: non-blocking
 * collectives on the comm stream). NULL: nothing is ever pending. */
void pl_device_set_drain(void (*drain)(pl_stream *s));

/* -- top: a process that never starts MPI (the grader's referee) ---------------------- */
void pl_init_local(int rank, int world, int *argc, char ***argv);
void pl_set_world_local(int rank, int world);

/* -- comm ---------------------------------------------------------------------------- */
void pl_comm_setup_world(void);
void pl_comm_teardown(void);
/* The comm backend counts what it hands to MPI / NCCL (pl_wire, pl_instrument.h). */
void pl_wire_p2p(int is_send, uint64_t bytes);
void pl_wire_coll(uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
