/* ds_fashion.h - Fashion-MNIST (and a synthetic stand-in for tests), normalised, plus the
 * DistributedSampler that deals a dataset's indices out to the ranks.
 *
 * Files: {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz in the directory named by
 * FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist (Debian package
 * dataset-fashion-mnist). Pixels become (p / 255 - 0.2860) / 0.3530, the training set's
 * mean and standard deviation.
 */
#ifndef DS_FASHION_H
#define DS_FASHION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DS_FASHION_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define DS_FASHION_MEAN 0.2860f
#define DS_FASHION_STD 0.3530f

typedef struct {
    size_t n;        /* examples                                    */
    int dim;         /* features per example (784 = 28 x 28)        */
    int classes;     /* 10                                          */
    float *x;        /* [n, dim] host, normalised                   */
    int *y;          /* [n] host, labels in [0, classes)            */
} ds_dataset;

/* The directory to read: $FASHION_MNIST_DIR or the default. */
const char *ds_fashion_dir(void);
/* split: "train" or "t10k". Returns 0, or -1 with a one-line reason in err. */
int ds_fashion_load(const char *dir, const char *split, ds_dataset *out, char *err, size_t errlen);
/* Normalise raw pixels into x (count values). */
void ds_fashion_normalise(float *x, const uint8_t *pixels, size_t count);

/* A learnable stand-in, for tests that must not depend on the package: one random
 * prototype per class plus noise, every value from the counter RNG under `seed`, so any
 * rank can build any example. */
void ds_synthetic(ds_dataset *out, size_t n, int dim, int classes, uint64_t seed);
void ds_dataset_free(ds_dataset *d);

/* DistributedSampler (PyTorch semantics): each epoch a permutation of [0, len) seeded by
 * seed + epoch (identity when !shuffle), padded by repeating its head (or cut with
 * drop_last) to a multiple of the world size; rank r takes every world-th index from r. */
typedef struct {
    size_t len;
    int world, rank;
    uint64_t seed;
    bool shuffle, drop_last;
    size_t num_samples; /* per rank */
    size_t total;       /* num_samples * world */
} ds_sampler;

void ds_sampler_init(ds_sampler *s, size_t len, int world, int rank, uint64_t seed, bool shuffle,
                     bool drop_last);
/* Writes s->num_samples indices for `epoch`. */
void ds_sampler_indices(const ds_sampler *s, uint64_t epoch, size_t *out);

#endif
