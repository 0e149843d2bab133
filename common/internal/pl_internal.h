/* pl_internal.h - hooks between the harness's own files (not for labs).
 *
 * The harness is layered; each layer calls only the ones below it:
 *   runtime    pl_runtime.c                 info, the backends in use, logging, errors, abort
 *   instrument pl_trace.c, pl_memstat.c     records, counters, regions, clock, watchdog
 *   device     pl_device*.c(u), pl_memtag.c streams, events, GEMM, the deferred queues,
 *              pl_memguard.c                memory categories, allocation sites, red zones
 *   comm       pl_comm*.c(u)                communicators, p2p, collectives, host collectives
 *                                           (pl_comm_defer.c: on deferred streams)
 *   sym        pl_sym*.c(u)                 symmetric memory (pl_sym_wire.c: its counters)
 *   top        pl_init.c, pl_check.c, pl_costmodel.c, pl_export.c, pl_rng.c
 * No two files depend on each other, even through others (tests/grader/test_layout.sh).
 * A lower layer that must reach a higher one at run time (the device layer completing the
 * cpu comm stream's pending operations; NVTX ranges; the watchdog aborting NCCL) is given a
 * hook by pl_init(), never a direct call.
 */
#ifndef PL_INTERNAL_H
#define PL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_device.h"     // defines: pl_stream
#include "pl_memcheck.h"   // defines: pl_alloc_info
#include "pl_instrument.h" // defines: pl_trace_event

#ifdef __cplusplus
extern "C" {
#endif

/* -- instrument ---------------------------------------------------------------------- */
void pl_trace_start_clock(void);
/* Position of the event just recorded (since pl_init; (size_t)-1 when the record is
 * full), a way to close it when an async op completes, and to set both its times when
 * deferred work runs (t_end < 0: still open). Positions cleared away are ignored. */
size_t pl_trace_record_open(const pl_trace_event *e);
void pl_trace_close(size_t pos, double t_end);
/* pl_trace_close at the trace clock's now, read only when the record is still open. */
void pl_trace_close_now(size_t pos);
void pl_trace_retime(size_t pos, double t_start, double t_end);
/* pl_info()->watchdog_sec, without the copy (the watchdog reads it on every poll). */
double pl_watchdog_sec(void);
/* The watchdog's evidence that this rank advances (pl_progress_tick, pl_instrument.h), on
 * a board of PL_BOARD_WORDS words per rank that pl_init shares between the ranks of a
 * node (two used; a cache line each, so that one rank's ticks do not evict its
 * neighbour's line); `busy` marks a long call (a GEMM, a kernel) in progress. */
#define PL_BOARD_WORDS 8
void pl_progress_busy(int busy);
void pl_watchdog_set_board(volatile uint64_t *slots, int nranks, int mine);
/* The board among this node's ranks of MPI_COMM_WORLD for a process that keeps no watchdog
 * of its own but shows its node to one that does (a referee, to its player); pl_init shares
 * its own. Collective over MPI_COMM_WORLD, after MPI_Init. */
void pl_share_progress_board(void);
void pl_free_progress_board(void);
/* The board now: every rank's ticks summed, and whether any of them marks itself busy. */
uint64_t pl_progress_node(int *any_busy);
/* Two words another process writes, whose changes count as progress on this node: [0] as
 * ticks, [1] as a rank computing (for PL_WD_HOST_LIMITS limits at most). A graded player
 * reads its referees' board through them (its referee copies it into the arena's head).
 * NULL: none. They can only keep this process's own watchdog from firing. */
void pl_watchdog_watch_words(const volatile uint64_t *words);
void pl_trace_set_region_hooks(void (*begin)(const char *name), void (*end)(void));
/* Allocations (pl_memcheck.h): a new one (its serial is assigned here), one freed (its
 * entry into *out; false when p was never allocated), and each live one in turn. */
void pl_mem_track_alloc(const pl_alloc_info *a);
bool pl_mem_track_free(const void *p, pl_alloc_info *out);
void pl_mem_each(void (*fn)(pl_alloc_info *a, void *ctx), void *ctx);
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
/* Deferred streams (pl_comm_defer.c): a collective queued instead of issued (false when
 * the streams are eager; es, the bytes of an element: 4, or 2 for the bf16 all-gather and
 * reduce-scatter), a send or receive added to the open group, the outermost group ended. */
bool pl_comm_defer_coll(pl_op_kind kind, const void *sb, void *rb, size_t n, size_t es, pl_op op, int root,
                        pl_comm *c, pl_stream *s, size_t trace);
void pl_comm_defer_p2p(bool is_send, float *buf, size_t count, int peer, pl_comm *c, pl_stream *s,
                       size_t trace);
void pl_comm_defer_group_end(void);
void pl_comm_defer_teardown(void);
/* The comm backend counts what it hands to MPI / NCCL (pl_wire, pl_instrument.h). */
void pl_wire_p2p(int is_send, uint64_t bytes);
void pl_wire_coll(uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
