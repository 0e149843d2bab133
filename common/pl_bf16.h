/* pl_bf16.h - one bfloat16 value: the top 16 bits of a float32 (sign, 8 exponent bits, 7
 * mantissa bits), stored as a uint16_t word. The harness's bf16 collectives (pl_comm.h) and
 * the conversion kernels (kernels/kern_bf16.h) all round with this rule.
 *
 * Narrowing rounds to nearest, ties to even (PyTorch's .to(torch.bfloat16), CUDA's
 * __float2bfloat16_rn): add 0x7FFF plus the lowest kept bit, then drop 16 bits. Values past
 * the largest bf16 round to infinity; a NaN stays a NaN (quiet bit set) instead of rounding
 * into an infinity. Widening is exact (16 zero bits appended). */
#ifndef PL_BF16_H
#define PL_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t pl_bf16_from_float(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float pl_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
