/* pl.h - the ParaLab harness: the one header a lab includes.
 * defines: runtime (pl_init, pl_rank, errors), device memory/streams/events/GEMM,
 * communicators and collectives, symmetric memory (one-sided puts and signals), tensor
 * views, counter RNG, instrumentation, checks. */
#ifndef PL_H
#define PL_H

#include "pl_check.h"
#include "pl_comm.h"
#include "pl_device.h"
#include "pl_memtag.h"
#include "pl_rng.h"
#include "pl_runtime.h"
#include "pl_sym.h"
#include "pl_tensor.h"
#include "pl_trace.h"

#endif
