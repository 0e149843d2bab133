/* kern_bf16.h - bfloat16 storage: float32 <-> bf16 conversion over device arrays.
 *
 * A bf16 value (common/pl_bf16.h) is the top 16 bits of a float32, kept as a uint16_t word
 * on both devices: the cpu device has no bf16 arithmetic, so
 * data is stored and communicated as 16-bit words and widened to float32 for compute, which
 * is also what a GPU's tensor cores do inside a bf16 GEMM (bf16 inputs, fp32 accumulation).
 *
 * Narrowing rounds to nearest, ties to even, NaN kept NaN (pl_bf16_from_float); widening is
 * exact.
 *
 * Entry points as in every kernels/ family (kern_gelu.h): dispatcher, _ref (CPU
 * reference), _cuda (CUDA builds only).
 */
#ifndef KERN_BF16_H
#define KERN_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "pl_bf16.h"   // defines: pl_bf16_from_float, pl_bf16_to_float (the rule, one value)
#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

void kern_bf16_from_f32(uint16_t *dst,     /* [n] bf16 words                  */
                        const float *src,  /* [n]                             */
                        size_t n, pl_stream *s);
void kern_bf16_to_f32(float *dst,          /* [n]                             */
                      const uint16_t *src, /* [n] bf16 words                  */
                      size_t n, pl_stream *s);

/* Bytes read + written and flops of one call (docs/cost-model.md, "Kernels"): 6n bytes,
 * n flops narrowing, none widening. */
void kern_bf16_cost(size_t n, int narrowing, double *bytes, double *flops);

void kern_bf16_from_f32_ref(uint16_t *dst, const float *src, size_t n);
void kern_bf16_to_f32_ref(float *dst, const uint16_t *src, size_t n);
#ifdef PL_HAVE_CUDA
void kern_bf16_from_f32_cuda(uint16_t *dst, const float *src, size_t n, pl_stream *s);
void kern_bf16_to_f32_cuda(float *dst, const uint16_t *src, size_t n, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
