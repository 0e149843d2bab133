/* kern_dispatch.h - the one shape of every kernel dispatcher in kernels/ (internal):
 * wait for what is pending on the stream, run the CUDA version on the cuda backend or the
 * CPU reference otherwise, and record the call for the trace and the cost model with the
 * bytes it reads and writes and the arithmetic it does (docs/cost-model.md, "Kernels").
 */
#ifndef KERN_DISPATCH_H
#define KERN_DISPATCH_H

#include "pl_device.h"  // defines: pl_stream_ready, pl_stream_id
#include "pl_runtime.h" // defines: pl_info, PL_DEVICE_CUDA
#include "pl_instrument.h" // defines: pl_trace_kernel, pl_trace_clock

/* What one tanhf / expf / logf / sqrtf counts as in a kernel's flop count: about the
 * length of the range reduction and polynomial a math library evaluates for it. */
#define KERN_TRANSCENDENTAL 32.0

#ifdef PL_HAVE_CUDA
#define KERN_ON_CUDA() (pl_info()->device == PL_DEVICE_CUDA)
#define KERN_CUDA(call) call
#else
#define KERN_ON_CUDA() 0
#define KERN_CUDA(call) ((void)0)
#endif

/* In a dispatcher whose stream parameter is `s`: run cuda_call or ref_call, then record
 * NAME with BYTES and FLOPS (doubles, for the whole call). */
#define KERN_DISPATCH(name, bytes, flops, cuda_call, ref_call)                                  \
    do {                                                                                        \
        s = pl_stream_ready(s);                                                                 \
        double kern_t0_ = pl_trace_clock();                                                     \
        if (KERN_ON_CUDA()) KERN_CUDA(cuda_call);                                               \
        else ref_call;                                                                          \
        pl_trace_kernel(name, pl_stream_id(s), (double)(bytes), (double)(flops), kern_t0_);               \
    } while (0)

#endif
