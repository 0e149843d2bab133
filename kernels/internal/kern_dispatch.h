/* kern_dispatch.h - the one shape of every kernel dispatcher in kernels/ (internal):
 * run the CUDA version on the cuda backend, or the CPU reference as device work on the
 * stream (pl_launch: now, after what is pending on it, or queued on a deferred stream), and
 * record the call for the trace and the cost model with the bytes it reads and writes and
 * the arithmetic it does (docs/cost-model.md, "Kernels").
 *
 * A deferred stream keeps a kernel's arguments until it runs, so each CPU reference has a
 * thunk: at file scope, KERN_THUNK(tag, ref_fn, T1, T2, ...) with ref_fn's parameter
 * types defines the record kern_args_<tag> and kern_run_<tag>, which calls ref_fn from
 * one; the dispatcher then names the tag and the arguments (KERN_DISPATCH).
 */
#ifndef KERN_DISPATCH_H
#define KERN_DISPATCH_H

#include "pl_defer.h"      // defines: pl_launch (device work, now or deferred)
#include "pl_device.h"     // defines: pl_stream_ready, pl_stream_id
#include "pl_instrument.h" // defines: pl_trace_kernel, pl_trace_clock
#include "pl_runtime.h"    // defines: pl_info, PL_DEVICE_CUDA

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

/* In a dispatcher whose stream parameter is `s`: run cuda_call, or TAG's CPU reference
 * with the arguments that follow, then record NAME with BYTES and FLOPS (doubles, for
 * the whole call). */
#define KERN_DISPATCH(kname, kbytes, kflops, cuda_call, tag, ...)                               \
    do {                                                                                        \
        if (KERN_ON_CUDA()) {                                                                   \
            s = pl_stream_ready(s);                                                             \
            double kern_t0_ = pl_trace_clock();                                                 \
            KERN_CUDA(cuda_call);                                                               \
            pl_trace_kernel(kname, pl_stream_id(s), (double)(kbytes), (double)(kflops), kern_t0_); \
        } else {                                                                                \
            kern_args_##tag kern_a_ = {__VA_ARGS__};                                            \
            pl_trace_event kern_rec_ = {.kind = PL_OP_KERNEL, .peer = -1, .name = (kname),      \
                                        .bytes = (uint64_t)(kbytes), .flops = (double)(kflops)}; \
            pl_launch(s, &kern_rec_, kern_run_##tag, &kern_a_, sizeof kern_a_);                 \
        }                                                                                       \
    } while (0)

/* KERN_THUNK(tag, fn, T1, ..., Tn), n = 1..18: the argument record and its runner. */
#define KERN_THUNK(tag, fn, ...) KERN_CAT_(KERN_THUNK_, KERN_NARGS_(__VA_ARGS__))(tag, fn, __VA_ARGS__)
#define KERN_CAT_(a, b) KERN_CAT2_(a, b)
#define KERN_CAT2_(a, b) a##b
#define KERN_NARGS_(...) KERN_NTH_(__VA_ARGS__, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define KERN_NTH_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, n, ...) n
#define KERN_THUNK_1(tag, fn, T1) \
    typedef struct { T1 a1; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1); }
#define KERN_THUNK_2(tag, fn, T1, T2) \
    typedef struct { T1 a1; T2 a2; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2); }
#define KERN_THUNK_3(tag, fn, T1, T2, T3) \
    typedef struct { T1 a1; T2 a2; T3 a3; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3); }
#define KERN_THUNK_4(tag, fn, T1, T2, T3, T4) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4); }
#define KERN_THUNK_5(tag, fn, T1, T2, T3, T4, T5) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5); }
#define KERN_THUNK_6(tag, fn, T1, T2, T3, T4, T5, T6) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6); }
#define KERN_THUNK_7(tag, fn, T1, T2, T3, T4, T5, T6, T7) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7); }
#define KERN_THUNK_8(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8); }
#define KERN_THUNK_9(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9); }
#define KERN_THUNK_10(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10); }
#define KERN_THUNK_11(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11); }
#define KERN_THUNK_12(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12); }
#define KERN_THUNK_13(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; T13 a13; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12, a->a13); }
#define KERN_THUNK_14(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; T13 a13; T14 a14; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12, a->a13, a->a14); }

#define KERN_THUNK_15(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; T13 a13; T14 a14; T15 a15; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12, a->a13, a->a14, a->a15); }
#define KERN_THUNK_16(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; T13 a13; T14 a14; T15 a15; T16 a16; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12, a->a13, a->a14, a->a15, a->a16); }
#define KERN_THUNK_17(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; T13 a13; T14 a14; T15 a15; T16 a16; T17 a17; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12, a->a13, a->a14, a->a15, a->a16, a->a17); }
#define KERN_THUNK_18(tag, fn, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18) \
    typedef struct { T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7; T8 a8; T9 a9; T10 a10; T11 a11; T12 a12; T13 a13; T14 a14; T15 a15; T16 a16; T17 a17; T18 a18; } kern_args_##tag; \
    static void kern_run_##tag(void *p, pl_stream *s) { (void)s; const kern_args_##tag *a = p; fn(a->a1, a->a2, a->a3, a->a4, a->a5, a->a6, a->a7, a->a8, a->a9, a->a10, a->a11, a->a12, a->a13, a->a14, a->a15, a->a16, a->a17, a->a18); }
#endif
