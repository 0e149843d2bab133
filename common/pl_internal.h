/* pl_internal.h - hooks between the harness's own files (not for labs). */
#ifndef PL_INTERNAL_H
#define PL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pl_trace.h"

void pl_device_setup_streams(void);
void pl_device_teardown_streams(void);
void pl_comm_setup_world(void);
void pl_comm_teardown(void);
void pl_trace_start_clock(void);
/* Index of the event just recorded, and a way to close it when an async op completes. */
size_t pl_trace_record_open(const pl_trace_event *e);
void pl_trace_close(size_t index, double t_end);
void pl_mem_track_alloc(void *p, size_t bytes);
void pl_mem_track_free(void *p);
void pl_watchdog_start(void);

#endif
