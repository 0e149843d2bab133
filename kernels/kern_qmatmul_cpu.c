/* kern_qmatmul_cpu.c - the vectorised CPU version of kern_qmatmul_forward (kern_qmatmul.h),
 * what the dispatcher runs on the cpu device. Compiled with -O3 -ffp-contract=fast (the
 * Makefile): the loops below are vectorised, and a multiply followed by an add becomes one
 * FMA, which only rounds less. The reference (kern_qmatmul.c) keeps the default flags, so
 * that it dequantises bit for bit as datasets/ds_gguf.c does. */
#include <stdlib.h>
#include <string.h>

#include "kern_qmatmul.h"
#include "pl_runtime.h" // defines: PL_CHECK

/* ================================================================================== */
/* Vectorised CPU version                                                              */
/* ================================================================================== */

/* GCC vector types: 8 floats are one AVX register, two SSE ones, two NEON ones. On x86-64
 * the entry point is compiled twice (target_clones): for the baseline (SSE2) and for
 * x86-64-v3 (AVX2, FMA), picked at load time by what the CPU has; no -march needed. */
typedef float v8f __attribute__((vector_size(32)));

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#define KERN_CLONES __attribute__((target_clones("default", "arch=x86-64-v3")))
#else
#define KERN_CLONES
#endif
#define KERN_INLINE static inline __attribute__((always_inline))

KERN_INLINE v8f load8(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}
KERN_INLINE float hsum(v8f v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

/* The 32 integers of a block as 4 vectors of 8 floats (exact: |q| <= 127), and its d, m,
 * widened in registers in steps GCC 12 compiles to vector instructions (bytes -> 16-bit
 * lanes -> 32-bit lanes -> floats: pmovzx/pmovsx, cvtdq2ps); it scalarises a direct
 * __builtin_convertvector of 8 bytes to 8 floats, and a loop of 16 that it unrolls first. */
typedef uint8_t v16u8 __attribute__((vector_size(16)));
typedef int8_t v16i8 __attribute__((vector_size(16)));
typedef int16_t v16i16 __attribute__((vector_size(32)));
typedef int16_t v8i16 __attribute__((vector_size(16)));
typedef int32_t v8i32 __attribute__((vector_size(32)));

KERN_INLINE void widen16(v16i16 w, v8f *a, v8f *b) {
    v8i16 lo, hi;
    memcpy(&lo, &w, 16);
    memcpy(&hi, (const char *)&w + 16, 16);
    *a = __builtin_convertvector(__builtin_convertvector(lo, v8i32), v8f);
    *b = __builtin_convertvector(__builtin_convertvector(hi, v8i32), v8f);
}

KERN_INLINE void unpack(const uint8_t *blk, const int type, v8f q[4], float *d, float *m) {
    *d = kern_half_to_float(blk);
    if (type == KERN_Q8_0) {
        v16i8 a, b;
        memcpy(&a, blk + 2, 16);
        memcpy(&b, blk + 18, 16);
        widen16(__builtin_convertvector(a, v16i16), &q[0], &q[1]);
        widen16(__builtin_convertvector(b, v16i16), &q[2], &q[3]);
        return;
    }
    v16u8 raw;
    memcpy(&raw, blk + (type == KERN_Q4_1 ? 4 : 2), 16);
    v16i16 lo = __builtin_convertvector(raw & 15, v16i16), hi = __builtin_convertvector(raw >> 4, v16i16);
    if (type == KERN_Q4_1) *m = kern_half_to_float(blk + 2);
    else lo -= 8, hi -= 8; /* Q4_0's offset, exact in 16 bits */
    widen16(lo, &q[0], &q[1]);
    widen16(hi, &q[2], &q[3]);
}

/* One row, one token: sum_b d_b (q_b . x_b) + m_b X_b, the weights unpacked on the fly. */
KERN_INLINE float row_dot(const uint8_t *row, const int type, size_t bb, int nb, const float *x, const float *xsum) {
    v8f acc = {0};
    float macc = 0.0f;
    for (int b = 0; b < nb; b++) {
        v8f q[4];
        float d, m = 0.0f;
        unpack(row + (size_t)b * bb, type, q, &d, &m);
        const float *xb = x + (size_t)b * KERN_QK;
        v8f p = q[0] * load8(xb) + q[1] * load8(xb + 8) + q[2] * load8(xb + 16) + q[3] * load8(xb + 24);
        acc += p * d;
        if (type == KERN_Q4_1) macc += m * xsum[b];
    }
    return hsum(acc) + macc;
}

/* One row, tokens t0 .. t0+3 (nt of them): the row unpacked once into qf (floats of its
 * integers), each vector of it multiplied with 4 tokens' x while it is in a register. */
KERN_INLINE void row_dot4(const float *qf, const float *dm, const int type, int nb, const float *x, int ldx,
                          const float *xsum, int nt, float *out) {
    v8f acc[4] = {{0}, {0}, {0}, {0}};
    float macc[4] = {0, 0, 0, 0};
    for (int b = 0; b < nb; b++) {
        v8f p[4] = {{0}, {0}, {0}, {0}};
        for (int k = 0; k < 4; k++) {
            v8f q = load8(qf + (size_t)b * KERN_QK + 8 * k);
            for (int t = 0; t < 4; t++)
                if (t < nt) p[t] += q * load8(x + (size_t)t * ldx + (size_t)b * KERN_QK + 8 * k);
        }
        for (int t = 0; t < 4; t++) {
            acc[t] += p[t] * dm[2 * b];
            if (type == KERN_Q4_1 && t < nt) macc[t] += dm[2 * b + 1] * xsum[(size_t)t * nb + b];
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum(acc[t]) + macc[t];
}

KERN_INLINE void qmatmul(float *y, int ldy, const float *x, int ldx, const uint8_t *W, const int type, int n, int rows,
                         int cols, float *qf, float *dm, float *xsum) {
    size_t bb = kern_q_block_bytes(type), rb = kern_q_row_bytes(type, cols);
    int nb = cols / KERN_QK;
    for (int t = 0; t < n && type == KERN_Q4_1; t++) /* X_b: Q4_1's m multiplies a block's sum of x */
        for (int b = 0; b < nb; b++) {
            const float *xb = x + (size_t)t * ldx + (size_t)b * KERN_QK;
            xsum[(size_t)t * nb + b] = hsum(load8(xb) + load8(xb + 8) + load8(xb + 16) + load8(xb + 24));
        }
    if (n == 1) { /* decode: each weight is used once, unpacked where it is used */
        for (int r = 0; r < rows; r++) y[r] = row_dot(W + (size_t)r * rb, type, bb, nb, x, xsum);
        return;
    }
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = W + (size_t)r * rb;
        for (int b = 0; b < nb; b++) {
            v8f q[4];
            float d, m = 0.0f;
            unpack(row + (size_t)b * bb, type, q, &d, &m);
            memcpy(qf + (size_t)b * KERN_QK, q, sizeof q);
            dm[2 * b] = d, dm[2 * b + 1] = m;
        }
        for (int t = 0; t < n; t += 4) {
            int nt = n - t < 4 ? n - t : 4;
            float out[4];
            row_dot4(qf, dm, type, nb, x + (size_t)t * ldx, ldx, xsum + (size_t)t * nb, nt, out);
            for (int i = 0; i < nt; i++) y[(size_t)(t + i) * ldy + r] = out[i];
        }
    }
}

KERN_CLONES static void qmatmul_any(float *y, int ldy, const float *x, int ldx, const uint8_t *W, int type, int n,
                                    int rows, int cols, float *qf, float *dm, float *xsum) {
    /* one copy of the loops per type, so that the type's branches fold away */
    switch (type) {
    case KERN_Q4_0: qmatmul(y, ldy, x, ldx, W, KERN_Q4_0, n, rows, cols, qf, dm, xsum); break;
    case KERN_Q4_1: qmatmul(y, ldy, x, ldx, W, KERN_Q4_1, n, rows, cols, qf, dm, xsum); break;
    default: qmatmul(y, ldy, x, ldx, W, KERN_Q8_0, n, rows, cols, qf, dm, xsum); break;
    }
}

void kern_qmatmul_forward_cpu(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                              int cols) {
    kern_q_check_args(type, cols);
    if (n <= 0 || rows <= 0) return;
    int nb = cols / KERN_QK;
    /* scratch: the unpacked row (prefill), its scales, the block sums of x (Q4_1) */
    float *scratch = malloc(((size_t)cols + 2 * (size_t)nb + (size_t)n * nb + 8) * sizeof(float));
    PL_CHECK(scratch != NULL, "out of host memory");
    qmatmul_any(y, ldy, x, ldx, W, type, n, rows, cols, scratch, scratch + cols, scratch + cols + 2 * (size_t)nb);
    free(scratch);
}

