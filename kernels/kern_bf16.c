/* kern_bf16.c - float32 <-> bfloat16 conversion: CPU reference and dispatcher. */
#include "kern_bf16.h"

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

void kern_bf16_from_f32_ref(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = pl_bf16_from_float(src[i]);
}

void kern_bf16_to_f32_ref(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = pl_bf16_to_float(src[i]);
}

void kern_bf16_cost(size_t n, int narrowing, double *bytes, double *flops) {
    /* 4 bytes read and 2 written per element, or the other way round; the rounding add */
    *bytes = 6.0 * (double)n;
    *flops = narrowing ? (double)n : 0.0;
}

/* what a deferred stream keeps of each CPU reference's arguments (kern_dispatch.h) */
KERN_THUNK(kern_bf16_from_f32_ref, kern_bf16_from_f32_ref, uint16_t *, const float *, size_t)
KERN_THUNK(kern_bf16_to_f32_ref, kern_bf16_to_f32_ref, float *, const uint16_t *, size_t)

void kern_bf16_from_f32(uint16_t *dst, const float *src, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_bf16_cost(n, 1, &bytes, &flops);
    KERN_DISPATCH("bf16_from_f32", bytes, flops, kern_bf16_from_f32_cuda(dst, src, n, s),
                  kern_bf16_from_f32_ref, dst, src, n);
}

void kern_bf16_to_f32(float *dst, const uint16_t *src, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_bf16_cost(n, 0, &bytes, &flops);
    KERN_DISPATCH("bf16_to_f32", bytes, flops, kern_bf16_to_f32_cuda(dst, src, n, s),
                  kern_bf16_to_f32_ref, dst, src, n);
}
