// expect: wrong equal.*
/* Broken on purpose: stream discipline. The solution without a single pl_stream_wait_event:
 * the comm stream's all-reduce no longer waits for the compute stream that writes the
 * gradients, and backward_end no longer makes the compute stream wait for the reduced
 * buckets. Every result is right when streams run in order at once (the cpu device's
 * eager mode) and wrong on a GPU - and under the deferred streams of a graded run, which
 * run what nobody waited for in the order that exposes it. */
#include "pl.h" /* declared before the macro below */
#define pl_stream_wait_event(s, e) ((void)(s), (void)(e))
#include "../../../solutions/06-ddp/ddp.c"
