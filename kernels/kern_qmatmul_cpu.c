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

/* The 32 integers of a block as 4 vectors of 8 floats, and its d, m. Two ways:
 *
 * - little-endian with __builtin_shufflevector (GCC 12, clang): one byte shuffle puts 8
 *   integers in the top byte of 8 32-bit lanes, zeros below (pshufb on x86, tbl on ARM), so
 *   the lanes hold q * 2^24 with q's sign, and one conversion makes floats of them; d comes
 *   back as d * 2^-24. Scaling by a power of two is exact, so every product and sum rounds
 *   as it would with q and d themselves (short of |x| > 1e29, where q 2^24 x would overflow,
 *   and of products below 2^-126, which stay normal a little longer);
 * - otherwise, widening in steps (bytes -> 16 -> 32-bit lanes -> floats), which GCC also
 *   vectorises; it scalarises a direct __builtin_convertvector of 8 bytes to 8 floats. */
typedef uint8_t v16u8 __attribute__((vector_size(16)));
typedef int32_t v8i32 __attribute__((vector_size(32)));

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && (defined(__clang__) || __GNUC__ >= 12)
#define QSCALE 0x1p-24f
typedef uint8_t v32u8 __attribute__((vector_size(32)));
#define Z 32 /* a byte of the zero vector */
/* Bytes 0..7 of b into a, 8..15 into b's floats, each times 2^24. */
KERN_INLINE void widen_pair(v16u8 b, v8f *qa, v8f *qb) {
    v32u8 both = __builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5,
                                         6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    v32u8 z = {0};
    v32u8 a0 = __builtin_shufflevector(both, z, Z, Z, Z, 0, Z, Z, Z, 1, Z, Z, Z, 2, Z, Z, Z, 3, Z, Z, Z, 20, Z, Z, Z,
                                       21, Z, Z, Z, 22, Z, Z, Z, 23);
    v32u8 a1 = __builtin_shufflevector(both, z, Z, Z, Z, 8, Z, Z, Z, 9, Z, Z, Z, 10, Z, Z, Z, 11, Z, Z, Z, 28, Z, Z, Z,
                                       29, Z, Z, Z, 30, Z, Z, Z, 31);
    *qa = __builtin_convertvector((v8i32)a0, v8f);
    *qb = __builtin_convertvector((v8i32)a1, v8f);
}
#undef Z
#else
#define QSCALE 1.0f
typedef int8_t v16i8 __attribute__((vector_size(16)));
typedef int16_t v16i16 __attribute__((vector_size(32)));
typedef int16_t v8i16 __attribute__((vector_size(16)));
KERN_INLINE void widen_pair(v16u8 b, v8f *qa, v8f *qb) {
    v16i16 w = __builtin_convertvector((v16i8)b, v16i16);
    v8i16 lo, hi;
    memcpy(&lo, &w, 16);
    memcpy(&hi, (const char *)&w + 16, 16);
    *qa = __builtin_convertvector(__builtin_convertvector(lo, v8i32), v8f);
    *qb = __builtin_convertvector(__builtin_convertvector(hi, v8i32), v8f);
}
#endif

/* A block's fp16 scale: the compiler's _Float16 where it has one (one vcvtph2ps in the
 * x86-64-v3 clone, F16C), else the bit-exact conversion by hand (a dozen integer ops, which
 * a decode step would pay twice per Q4_1 block). */
#if defined(__FLT16_MAX__)
KERN_INLINE float half(const uint8_t *p) {
    _Float16 h;
    memcpy(&h, p, 2);
    return (float)h;
}
#else
#define half kern_half_to_float
#endif

/* Signed bytes throughout (Q4_1's nibbles are below 16 either way); d times QSCALE. */
KERN_INLINE void unpack(const uint8_t *blk, const int type, v8f q[4], float *d, float *m) {
    *d = half(blk) * QSCALE;
    v16u8 a, b;
    if (type == KERN_Q8_0) {
        memcpy(&a, blk + 2, 16);
        memcpy(&b, blk + 18, 16);
    } else {
        v16u8 raw;
        memcpy(&raw, blk + (type == KERN_Q4_1 ? 4 : 2), 16);
        a = raw & 15, b = raw >> 4;
        if (type == KERN_Q4_1) *m = half(blk + 2);
        else a -= 8, b -= 8; /* Q4_0's offset: -8 .. 7 as signed bytes */
    }
    widen_pair(a, &q[0], &q[1]);
    widen_pair(b, &q[2], &q[3]);
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

/* Rows r and r + 1 (q0, q1: each unpacked as its dequantised weights), tokens t0 ..
 * t0 + nt - 1 (nt <= 4): each x vector loaded once feeds both rows, each weight vector 4
 * tokens, so 6 loads bring 8 multiply-adds. r1 may be the same row as r0 (an odd last row). */
KERN_INLINE void rows2_dot(const float *q0, const float *q1, int cols, const float *x, int ldx, const int nt,
                           float *out0, float *out1) {
    v8f a[4] = {{0}, {0}, {0}, {0}}, b[4] = {{0}, {0}, {0}, {0}};
    for (int j = 0; j < cols; j += 8) {
        v8f qa = load8(q0 + j), qb = load8(q1 + j);
        for (int t = 0; t < 4; t++)
            if (t < nt) {
                v8f xv = load8(x + (size_t)t * ldx + j);
                a[t] += qa * xv;
                b[t] += qb * xv;
            }
    }
    for (int t = 0; t < nt; t++) out0[t] = hsum(a[t]), out1[t] = hsum(b[t]);
}

/* A row dequantised into w: d q exactly (at most 8 by 11 significant bits; the block's
 * QSCALE undone by the same power of two), plus m for Q4_1 rounded once: the same floats
 * as ds_gguf.c's dequantisation, so prefill's sums are of the dequantised weights. */
KERN_INLINE void unpack_row(const uint8_t *row, const int type, size_t bb, int nb, float *w) {
    for (int b = 0; b < nb; b++) {
        v8f q[4];
        float d, m = 0.0f;
        unpack(row + (size_t)b * bb, type, q, &d, &m);
        for (int k = 0; k < 4; k++) {
            v8f dq = q[k] * d;
            if (type == KERN_Q4_1) dq += m;
            memcpy(w + (size_t)b * KERN_QK + 8 * k, &dq, sizeof dq);
        }
    }
}

KERN_INLINE void qmatmul(float *y, int ldy, const float *x, int ldx, const uint8_t *W, const int type, int n, int rows,
                         int cols, float *qf, float *xsum) {
    size_t bb = kern_q_block_bytes(type), rb = kern_q_row_bytes(type, cols);
    int nb = cols / KERN_QK;
    if (n == 1) { /* decode: each weight is used once, unpacked where it is used */
        for (int b = 0; b < nb && type == KERN_Q4_1; b++) { /* X_b: Q4_1's m times a block's sum of x */
            const float *xb = x + (size_t)b * KERN_QK;
            xsum[b] = hsum(load8(xb) + load8(xb + 8) + load8(xb + 16) + load8(xb + 24));
        }
        for (int r = 0; r < rows; r++) y[r] = row_dot(W + (size_t)r * rb, type, bb, nb, x, xsum);
        return;
    }
    float *qf1 = qf + cols; /* the second row of a pair */
    for (int r = 0; r < rows; r += 2) {
        int r1 = r + 1 < rows ? r + 1 : r;
        unpack_row(W + (size_t)r * rb, type, bb, nb, qf);
        unpack_row(W + (size_t)r1 * rb, type, bb, nb, qf1);
        for (int t = 0; t < n; t += 4) {
            int nt = n - t < 4 ? n - t : 4;
            float o0[4], o1[4];
            const float *xt = x + (size_t)t * ldx;
            switch (nt) { /* a constant count: the accumulators stay in registers */
            case 4: rows2_dot(qf, qf1, cols, xt, ldx, 4, o0, o1); break;
            case 3: rows2_dot(qf, qf1, cols, xt, ldx, 3, o0, o1); break;
            case 2: rows2_dot(qf, qf1, cols, xt, ldx, 2, o0, o1); break;
            default: rows2_dot(qf, qf1, cols, xt, ldx, 1, o0, o1); break;
            }
            for (int i = 0; i < nt; i++) y[(size_t)(t + i) * ldy + r] = o0[i], y[(size_t)(t + i) * ldy + r1] = o1[i];
        }
    }
}

KERN_CLONES static void qmatmul_any(float *y, int ldy, const float *x, int ldx, const uint8_t *W, int type, int n,
                                    int rows, int cols, float *qf, float *xsum) {
    /* one copy of the loops per type, so that the type's branches fold away */
    switch (type) {
    case KERN_Q4_0: qmatmul(y, ldy, x, ldx, W, KERN_Q4_0, n, rows, cols, qf, xsum); break;
    case KERN_Q4_1: qmatmul(y, ldy, x, ldx, W, KERN_Q4_1, n, rows, cols, qf, xsum); break;
    default: qmatmul(y, ldy, x, ldx, W, KERN_Q8_0, n, rows, cols, qf, xsum); break;
    }
}

void kern_qmatmul_forward_cpu(float *y, int ldy, const float *x, int ldx, const void *W, int type, int n, int rows,
                              int cols) {
    kern_q_check_args(type, cols);
    if (n <= 0 || rows <= 0) return;
    int nb = cols / KERN_QK;
    /* scratch: two unpacked rows (prefill), the block sums of x (decode, Q4_1) */
    float *scratch = malloc((2 * (size_t)cols + (size_t)nb + 8) * sizeof(float));
    PL_CHECK(scratch != NULL, "out of host memory");
    qmatmul_any(y, ldy, x, ldx, W, type, n, rows, cols, scratch, scratch + 2 * (size_t)cols);
    free(scratch);
}

