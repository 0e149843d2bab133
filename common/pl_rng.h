/* pl_rng.h - counter-based random numbers.
 *
 * Element i of the global tensor `id` under `seed` is a pure function of (seed, id, i), so
 * any rank can generate any slice of a global tensor and get exactly the bits the serial
 * "master" tensor has. Tensor-, pipeline- and data-parallel checks all rely on this.
 */
#ifndef PL_RNG_H
#define PL_RNG_H

#include <stdint.h>

#include "pl_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PL_RNG_UNIFORM, /* uniform in [lo, hi)                                           */
    PL_RNG_NORMAL,  /* normal with mean lo and standard deviation hi                 */
    PL_RNG_SMALLINT /* integers in [lo, hi] stored as floats: every sum is exact      */
} pl_rng_dist;

uint64_t pl_rng_bits(uint64_t seed, uint64_t id, uint64_t index);
float pl_rng_value(uint64_t seed, uint64_t id, uint64_t index, pl_rng_dist dist, float lo,
                   float hi);

/* Fill host[0 .. rows*cols) with the block of the global (.. x global_cols) tensor whose
 * top-left element is (row0, col0). */
void pl_rng_fill_host(float *host, int64_t rows, int64_t cols, int64_t global_cols,
                      int64_t row0, int64_t col0, uint64_t seed, uint64_t id, pl_rng_dist dist,
                      float lo, float hi);
/* Same, written into a device tensor view. */
void pl_rng_fill(pl_tensor dst, int64_t global_cols, int64_t row0, int64_t col0, uint64_t seed,
                 uint64_t id, pl_rng_dist dist, float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif
