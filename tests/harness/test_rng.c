/* Every rank generates slices of a global tensor; they must equal the serial master bit
 * for bit, and gathering the slices must rebuild it. */
#include <stdlib.h>
#include <string.h>

#include "tap.h"

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    int n = pl_world(), me = pl_rank();
    const int64_t rows = 37, cols = 8 * 3 * 5 * 7; /* divisible by every world size 1..8 but 6? 840/6=140 */
    float *master = malloc(sizeof(float) * rows * cols);
    pl_rng_dist dists[3] = {PL_RNG_UNIFORM, PL_RNG_NORMAL, PL_RNG_SMALLINT};
    const char *names[3] = {"uniform", "normal", "smallint"};
    for (int d = 0; d < 3; d++) {
        pl_rng_fill_host(master, rows, cols, cols, 0, 0, 99, 3, dists[d], -1, 2);
        /* Column block of this rank. */
        int64_t w = cols / n;
        pl_tensor t = pl_tensor_alloc(rows, w);
        pl_rng_fill(t, cols, 0, me * w, 99, 3, dists[d], -1, 2);
        float *got = malloc(sizeof(float) * rows * w);
        pl_tensor_download(got, t);
        int ok = 1;
        for (int64_t r = 0; r < rows && ok; r++)
            ok = memcmp(got + r * w, master + r * cols + me * w, sizeof(float) * w) == 0;
        char msg[96];
        snprintf(msg, sizeof msg, "rng %s: column slice equals the master bit for bit", names[d]);
        tap_check(ok, msg);
        /* Row block, through a strided view of a wider buffer. */
        int64_t r0 = rows * me / n, r1 = rows * (me + 1) / n;
        pl_tensor wide = pl_tensor_alloc(r1 - r0, cols + 5);
        pl_tensor view = pl_tensor_cols(wide, 2, cols);
        pl_rng_fill(view, cols, r0, 0, 99, 3, dists[d], -1, 2);
        float *rowsbuf = malloc(sizeof(float) * (r1 - r0) * cols + 4);
        pl_tensor_download(rowsbuf, view);
        ok = memcmp(rowsbuf, master + r0 * cols, sizeof(float) * (r1 - r0) * cols) == 0;
        snprintf(msg, sizeof msg, "rng %s: row slice through a strided view equals the master", names[d]);
        tap_check(ok, msg);
        /* Gather the column slices of row 0..rows and rebuild the master. */
        float *dev_all = pl_malloc_floats((size_t)(rows * w * n));
        pl_allgather(t.data, dev_all, (size_t)(rows * w), pl_comm_world(), NULL);
        float *all = malloc(sizeof(float) * rows * w * n);
        pl_download(all, dev_all, sizeof(float) * rows * w * n);
        ok = 1;
        for (int q = 0; q < n && ok; q++)
            for (int64_t r = 0; r < rows && ok; r++)
                ok = memcmp(all + (q * rows + r) * w, master + r * cols + q * w, sizeof(float) * w) == 0;
        snprintf(msg, sizeof msg, "rng %s: gathered slices rebuild the master", names[d]);
        tap_check(ok, msg);
        pl_free(dev_all);
        pl_tensor_free(&t);
        pl_tensor_free(&wide);
        free(got);
        free(rowsbuf);
        free(all);
    }
    /* Statistics, loosely: a broken generator (constant, biased) fails these. */
    double sum = 0, sq = 0;
    int64_t N = rows * cols;
    pl_rng_fill_host(master, rows, cols, cols, 0, 0, 7, 1, PL_RNG_NORMAL, 0, 1);
    for (int64_t i = 0; i < N; i++) { sum += master[i]; sq += (double)master[i] * master[i]; }
    double mean = sum / N, var = sq / N - mean * mean;
    tap_check(mean > -0.05 && mean < 0.05 && var > 0.9 && var < 1.1, "rng normal: mean ~0 and variance ~1");
    pl_rng_fill_host(master, rows, cols, cols, 0, 0, 7, 1, PL_RNG_SMALLINT, -4, 4);
    int hist[9] = {0}, inrange = 1;
    for (int64_t i = 0; i < N; i++) {
        int v = (int)master[i];
        if (v < -4 || v > 4 || (float)v != master[i]) inrange = 0;
        else hist[v + 4]++;
    }
    int flat = 1;
    for (int i = 0; i < 9; i++) if (hist[i] < N / 9 * 0.85 || hist[i] > N / 9 * 1.15) flat = 0;
    tap_check(inrange && flat, "rng smallint: integers in [-4, 4], about uniform");
    tap_check(pl_rng_bits(1, 2, 3) != pl_rng_bits(2, 2, 3) && pl_rng_bits(1, 2, 3) != pl_rng_bits(1, 3, 3),
              "rng: seed and tensor id change the stream");
    free(master);
    return tap_finish();
}
