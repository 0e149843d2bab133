/* ds_fashion.c - Fashion-MNIST loading, the synthetic stand-in, the DistributedSampler. */
#include "ds_fashion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> // defines: access

#include "ds_idx.h"
#include "pl_rng.h" // defines: pl_rng_bits, pl_rng_value

const char *ds_fashion_dir(void) {
    const char *d = getenv("FASHION_MNIST_DIR");
    return d && *d ? d : DS_FASHION_DEFAULT_DIR;
}

void ds_fashion_normalise(float *x, const uint8_t *pixels, size_t count) {
    for (size_t i = 0; i < count; i++) x[i] = ((float)pixels[i] / 255.0f - DS_FASHION_MEAN) / DS_FASHION_STD;
}

static int load_idx(const char *dir, const char *split, const char *kind, int rank, uint8_t **buf,
                    ds_idx *idx, char *err, size_t errlen) {
    char path[1024], why[512];
    snprintf(path, sizeof path, "%s/%s-%s-idx%d-ubyte.gz", dir, split, kind, rank);
    size_t len;
    if (ds_read_file(path, buf, &len, why, sizeof why) != 0) {
        if (access(path, F_OK) != 0)
            snprintf(err, errlen, "Fashion-MNIST: %s (install the Debian package dataset-fashion-mnist or set FASHION_MNIST_DIR)", why);
        else
            snprintf(err, errlen, "Fashion-MNIST: %s", why);
        return -1;
    }
    if (ds_idx_parse(*buf, len, rank, idx, why, sizeof why) != 0) {
        snprintf(err, errlen, "Fashion-MNIST: %s: %s", path, why);
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

int ds_fashion_load(const char *dir, const char *split, ds_dataset *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (strcmp(split, "train") != 0 && strcmp(split, "t10k") != 0) {
        snprintf(err, errlen, "Fashion-MNIST: unknown split '%s' (train or t10k)", split);
        return -1;
    }
    uint8_t *ibuf = NULL, *lbuf = NULL;
    ds_idx im, lb;
    if (load_idx(dir, split, "images", 3, &ibuf, &im, err, errlen) != 0) return -1;
    if (load_idx(dir, split, "labels", 1, &lbuf, &lb, err, errlen) != 0) {
        free(ibuf);
        return -1;
    }
    int rc = -1;
    if (im.dims[1] != 28 || im.dims[2] != 28) {
        snprintf(err, errlen, "Fashion-MNIST: %s images are %ux%u, expected 28x28", split, im.dims[1], im.dims[2]);
    } else if (im.dims[0] != lb.dims[0]) {
        snprintf(err, errlen, "Fashion-MNIST: %s has %u images but %u labels", split, im.dims[0], lb.dims[0]);
    } else {
        size_t n = im.dims[0], bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (lb.data[i] > 9) bad = i;
        if (bad != n) {
            snprintf(err, errlen, "Fashion-MNIST: %s label %zu is %u, expected 0..9", split, bad, lb.data[bad]);
        } else {
            out->n = n;
            out->dim = 784;
            out->classes = 10;
            out->x = malloc(n * 784 * sizeof(float));
            out->y = malloc(n * sizeof(int));
            if (!out->x || !out->y) {
                snprintf(err, errlen, "Fashion-MNIST: out of host memory");
                ds_dataset_free(out);
            } else {
                ds_fashion_normalise(out->x, im.data, n * 784);
                for (size_t i = 0; i < n; i++) out->y[i] = lb.data[i];
                rc = 0;
            }
        }
    }
    free(ibuf);
    free(lbuf);
    return rc;
}

/* Counter-RNG ids of the synthetic tensors. */
enum { SYN_PROTO = 0x5e1, SYN_NOISE, SYN_LABEL };

void ds_synthetic(ds_dataset *out, size_t n, int dim, int classes, uint64_t seed) {
    memset(out, 0, sizeof *out);
    out->n = n;
    out->dim = dim;
    out->classes = classes;
    out->x = malloc((n * (size_t)dim + 1) * sizeof(float));
    out->y = malloc((n + 1) * sizeof(int));
    if (!out->x || !out->y) {
        fprintf(stderr, "ds_synthetic: out of host memory\n");
        exit(3);
    }
    for (size_t i = 0; i < n; i++) {
        int c = (int)(pl_rng_bits(seed, SYN_LABEL, i) % (uint64_t)classes);
        out->y[i] = c;
        for (int j = 0; j < dim; j++) {
            float proto = pl_rng_value(seed, SYN_PROTO, (uint64_t)c * dim + j, PL_RNG_NORMAL, 0.0f, 1.0f);
            float noise = pl_rng_value(seed, SYN_NOISE, i * (uint64_t)dim + j, PL_RNG_NORMAL, 0.0f, 1.0f);
            out->x[i * dim + j] = proto + noise;
        }
    }
}

void ds_dataset_free(ds_dataset *d) {
    free(d->x);
    free(d->y);
    d->x = NULL;
    d->y = NULL;
    d->n = 0;
}

void ds_sampler_init(ds_sampler *s, size_t len, int world, int rank, uint64_t seed, bool shuffle,
                     bool drop_last) {
    memset(s, 0, sizeof *s);
    s->len = len;
    s->world = world > 0 ? world : 1;
    s->rank = rank;
    s->seed = seed;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    size_t w = (size_t)s->world;
    s->num_samples = drop_last && len % w ? len / w : (len + w - 1) / w;
    s->total = s->num_samples * w;
}

void ds_sampler_indices(const ds_sampler *s, uint64_t epoch, size_t *out) {
    if (s->len == 0) return;
    size_t *perm = malloc(s->len * sizeof *perm);
    if (!perm) {
        fprintf(stderr, "ds_sampler: out of host memory\n");
        exit(3);
    }
    for (size_t i = 0; i < s->len; i++) perm[i] = i;
    if (s->shuffle) {
        /* Fisher-Yates driven by the counter RNG under seed + epoch: every rank computes
         * the same permutation without talking to the others. */
        for (size_t i = s->len - 1; i > 0; i--) {
            size_t j = (size_t)(pl_rng_bits(s->seed + epoch, 0x5A3, i) % (uint64_t)(i + 1));
            size_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    /* position k of the padded (or cut) list is perm[k mod len]; rank r takes k = r + i*world */
    for (size_t i = 0; i < s->num_samples; i++) out[i] = perm[((size_t)s->rank + i * (size_t)s->world) % s->len];
    free(perm);
}
