/* pl_rng.c - counter-based random numbers: a pure function of (seed, id, index). */
#include <math.h>
#include <stdlib.h>

#include "pl_device.h"
#include "pl_rng.h"
#include "pl_runtime.h"

/* splitmix64's finaliser: a bijection with good avalanche, applied to a counter. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint64_t pl_rng_bits(uint64_t seed, uint64_t id, uint64_t index) {
    uint64_t key = mix64(seed + 0x9E3779B97F4A7C15ull * (id + 1));
    return mix64(key ^ (index * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull));
}

/* 24 random bits -> [0, 1), exact in float. */
static float unit(uint64_t bits) { return (float)(bits >> 40) * (1.0f / 16777216.0f); }

float pl_rng_value(uint64_t seed, uint64_t id, uint64_t index, pl_rng_dist dist, float lo, float hi) {
    uint64_t b = pl_rng_bits(seed, id, index);
    switch (dist) {
    case PL_RNG_UNIFORM: return lo + (hi - lo) * unit(b);
    case PL_RNG_SMALLINT: {
        int64_t span = (int64_t)hi - (int64_t)lo + 1;
        if (span <= 0) return lo;
        return (float)((int64_t)lo + (int64_t)((b >> 11) % (uint64_t)span));
    }
    case PL_RNG_NORMAL: {
        /* Box-Muller from two independent 24-bit uniforms of the same counter. */
        float u1 = ((float)(b >> 40) + 1.0f) * (1.0f / 16777217.0f);
        float u2 = unit(b << 24);
        return lo + hi * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
    }
    }
    return 0.0f;
}

void pl_rng_fill_host(float *host, int64_t rows, int64_t cols, int64_t global_cols, int64_t row0,
                      int64_t col0, uint64_t seed, uint64_t id, pl_rng_dist dist, float lo, float hi) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint64_t index = (uint64_t)((row0 + r) * global_cols + col0 + c);
            host[r * cols + c] = pl_rng_value(seed, id, index, dist, lo, hi);
        }
}

void pl_rng_fill(pl_tensor dst, int64_t global_cols, int64_t row0, int64_t col0, uint64_t seed,
                 uint64_t id, pl_rng_dist dist, float lo, float hi) {
    PL_CHECK(col0 + dst.cols <= global_cols, "pl_rng_fill: slice wider than the global tensor");
    float *h = malloc((size_t)(dst.rows * dst.cols + 1) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    pl_rng_fill_host(h, dst.rows, dst.cols, global_cols, row0, col0, seed, id, dist, lo, hi);
    pl_tensor_upload(dst, h);
    free(h);
}
