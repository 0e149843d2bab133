/* pl_defer.h - device work as closures, and the deferred streams of the cpu device
 * (internal: the harness, kernels/ and the grader).
 *
 * Every operation that takes a stream reaches the device through pl_launch (device work)
 * or pl_defer_comm (communication). On eager streams (the default) the work runs at once,
 * after what is pending on its stream, as it always has. On deferred streams
 * (PL_STREAMS=deferred, or pl_streams_set_deferred; cpu device only) it is copied into its
 * stream's queue and runs only when something waits for it: an event sync or query, a
 * stream or device sync, pl_upload/pl_download, pl_free, a barrier, a host collective, a
 * communicator split or free, pl_finalize. Pending work then runs in an order chosen to
 * expose missing waits (docs/harness.md, "Deferred streams"):
 *   - of the work that may run (its stream's earlier work done, its event waits met), the
 *     one issued last runs first;
 *   - communication reads its inputs when it starts and delivers its outputs when it
 *     completes, and completes as late as possible: only when nothing else can run (one
 *     that nothing could run beside simply blocks);
 *   - communication on one communicator starts in issue order (ranks must match it);
 *   - a wait that needs communication to complete runs everything pending, so that a peer
 *     waiting for this rank always gets what it waits for.
 * A missing pl_stream_wait_event, or work on the wrong stream, then reads data too early
 * or overwrites it too soon, as it would on a GPU, and the same way on every run.
 */
#ifndef PL_DEFER_H
#define PL_DEFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_backend.h"    // defines: struct pl_stream, pl_order
#include "pl_instrument.h" // defines: pl_trace_event

#ifdef __cplusplus
extern "C" {
#endif

/* Device work: runs fn(args, s) to completion on the host (cpu device). */
typedef void (*pl_work_fn)(void *args, pl_stream *s);

/* Record `rec` (kind, name, bytes, flops; the stream and times are filled here) and run
 * fn on s (NULL: the compute stream). Eager: now, after s's pending communication.
 * Deferred: `size` bytes of args are copied and fn runs when something waits for s. */
void pl_launch(pl_stream *s, const pl_trace_event *rec, pl_work_fn fn, const void *args,
               size_t size);

/* Communication as deferred work: post starts it without blocking (reading its inputs),
 * test says whether it has completed, commit delivers its outputs and frees what the
 * args own. run does all three at once, blocking, when nothing else is pending (nothing
 * could run in between: the same outcome, at the speed of the blocking calls). */
typedef struct {
    const char *name;                        /* what the watchdog says it waits in */
    void (*post)(void *args, pl_stream *s);
    bool (*test)(void *args, pl_stream *s);
    void (*commit)(void *args, pl_stream *s);
    int (*peer)(const void *args); /* optional: the peer the watchdog names, or -1 */
    void (*run)(void *args, pl_stream *s);
} pl_comm_work;

#define PL_DEFER_MAX_ORDERS 4
/* Queue communication on s (deferred streams only). It starts after every earlier
 * operation of each of the norders orders (one per communicator it uses) has started. */
void pl_defer_comm(pl_stream *s, const pl_comm_work *ops, const void *args, size_t size,
                   pl_order *const *orders, int norders);
/* Later work on `waiter` runs after position pos of `on` (an event wait); pos = on's
 * queue position now (pl_defer_tail) joins the two streams. */
void pl_defer_wait(pl_stream *waiter, pl_stream *on, uint64_t pos);
uint64_t pl_defer_tail(const pl_stream *s);
/* Run pending work until s has run its first pos items (s NULL: until nothing is pending). */
void pl_defer_run(pl_stream *s, uint64_t pos);

/* The mode. Switching completes everything pending first. Deferred streams exist on the
 * cpu device only: asking for them elsewhere returns false and changes nothing. */
bool pl_streams_deferred(void);
bool pl_streams_set_deferred(bool on);

#ifdef __cplusplus
}
#endif

#endif
