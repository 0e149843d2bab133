/* test_datasets.c - the IDX reader, the Fashion-MNIST loader (the real files when the
 * package is installed, hand-made good and broken files always), the synthetic stand-in
 * and the DistributedSampler. Prints "ok - ..." / "not ok - ..."; exits 1 on a failure.
 * Usage: test_datasets TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "ds_fashion.h"
#include "ds_idx.h"

static int g_failed;
static const char *g_tmp;

static void check(int cond, const char *what, const char *detail) {
    if (!cond) g_failed++;
    printf("%s - %s%s%s%s\n", cond ? "ok" : "not ok", what, detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
}

static size_t idx_bytes(uint8_t *out, int rank, const uint32_t *dims, int seed) {
    out[0] = out[1] = 0;
    out[2] = 8;
    out[3] = (uint8_t)rank;
    size_t n = 1, p = 4;
    for (int d = 0; d < rank; d++) {
        out[p++] = dims[d] >> 24, out[p++] = dims[d] >> 16, out[p++] = dims[d] >> 8, out[p++] = dims[d];
        n *= dims[d];
    }
    for (size_t i = 0; i < n; i++) out[p + i] = (uint8_t)(rank == 1 ? (i * 3 + seed) % 10 : (i * 7 + seed) % 256);
    return p + n;
}

static void write_gz(const char *path, const uint8_t *b, size_t n) {
    gzFile f = gzopen(path, "wb");
    gzwrite(f, b, (unsigned)n);
    gzclose(f);
}

static void write_raw(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* A directory holding a small valid split "train" (n images), then one file broken. */
static void make_dir(const char *dir, size_t n) {
    mkdir(dir, 0755);
    static uint8_t buf[100000];
    char p[512];
    uint32_t di[3] = {(uint32_t)n, 28, 28}, dl[1] = {(uint32_t)n};
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    write_gz(p, buf, idx_bytes(buf, 3, di, 1));
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    write_gz(p, buf, idx_bytes(buf, 1, dl, 1));
}

static void expect_error(const char *dir, const char *what, const char *needle) {
    ds_dataset d;
    char err[512] = "", msg[700];
    int rc = ds_fashion_load(dir, "train", &d, err, sizeof err);
    int one_line = strchr(err, '\n') == NULL;
    snprintf(msg, sizeof msg, "%s", err);
    char name[256];
    snprintf(name, sizeof name, "loader rejects %s with a one-line error naming it", what);
    check(rc != 0 && one_line && strstr(err, needle) != NULL, name, msg);
    if (rc == 0) ds_dataset_free(&d);
}

static void test_files(void) {
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/good", g_tmp);
    make_dir(dir, 5);
    ds_dataset d;
    char err[512] = "";
    int rc = ds_fashion_load(dir, "train", &d, err, sizeof err);
    int ok = rc == 0 && d.n == 5 && d.dim == 784 && d.y[1] == 4;
    if (ok) ok = fabsf(d.x[1] - ((7.0f + 1.0f) / 255.0f - DS_FASHION_MEAN) / DS_FASHION_STD) < 1e-6f;
    check(ok, "a hand-made 5-image split loads, labels and normalised pixels as written", rc ? err : NULL);
    if (rc == 0) ds_dataset_free(&d);

    static uint8_t buf[100000];
    uint32_t di[3] = {5, 28, 28}, dl[1] = {5};
    size_t n;

    snprintf(dir, sizeof dir, "%s/trunc", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    n = idx_bytes(buf, 3, di, 1);
    write_gz(p, buf, n - 100);
    expect_error(dir, "truncated image data", "truncated IDX data");

    snprintf(dir, sizeof dir, "%s/header", g_tmp);
    make_dir(dir, 5);
    write_gz(p, buf, 10);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    write_gz(p, buf, 10);
    expect_error(dir, "a truncated header", "truncated IDX header");

    snprintf(dir, sizeof dir, "%s/magic", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    n = idx_bytes(buf, 3, di, 1);
    buf[0] = 0x1f;
    write_gz(p, buf, n);
    expect_error(dir, "a wrong magic", "not an IDX file");

    snprintf(dir, sizeof dir, "%s/swapped", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    write_gz(p, buf, idx_bytes(buf, 1, dl, 1));
    expect_error(dir, "a labels file where images belong (rank)", "rank 1, expected 3");

    snprintf(dir, sizeof dir, "%s/trailing", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    n = idx_bytes(buf, 1, dl, 1);
    write_gz(p, buf, n + 3);
    expect_error(dir, "trailing bytes", "trailing byte");

    snprintf(dir, sizeof dir, "%s/count", g_tmp);
    make_dir(dir, 5);
    uint32_t dl4[1] = {4};
    write_gz(p, buf, 0); /* placeholder path from the previous case, rewritten below */
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    write_gz(p, buf, idx_bytes(buf, 1, dl4, 1));
    expect_error(dir, "images and labels of different counts", "5 images but 4 labels");

    snprintf(dir, sizeof dir, "%s/label", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    n = idx_bytes(buf, 1, dl, 1);
    buf[8 + 2] = 12;
    write_gz(p, buf, n);
    expect_error(dir, "a label out of range", "label 2 is 12");

    snprintf(dir, sizeof dir, "%s/gzcut", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    size_t gn;
    uint8_t *gz = slurp(p, &gn);
    write_raw(p, gz, gn / 2);
    expect_error(dir, "a cut-off gzip stream", "gzip");

    snprintf(dir, sizeof dir, "%s/gzbad", g_tmp);
    make_dir(dir, 5);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    free(gz);
    gz = slurp(p, &gn);
    for (size_t i = 12; i < gn - 8; i += 5) gz[i] ^= 0x5a;
    write_raw(p, gz, gn);
    expect_error(dir, "corrupt gzip data", "gzip");
    free(gz);

    snprintf(dir, sizeof dir, "%s/none", g_tmp);
    expect_error(dir, "a missing directory", "dataset-fashion-mnist");
}

static void test_real(void) {
    const char *dir = ds_fashion_dir();
    char p[1024];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    struct stat st;
    if (stat(p, &st) != 0) {
        printf("ok - # SKIP real Fashion-MNIST not installed in %s\n", dir);
        return;
    }
    ds_dataset tr, te;
    char err[512] = "", msg[128];
    int rc = ds_fashion_load(dir, "train", &tr, err, sizeof err);
    check(rc == 0 && tr.n == 60000 && tr.dim == 784, "real Fashion-MNIST train: 60000 x 784", rc ? err : NULL);
    if (rc == 0) {
        size_t hist[10] = {0};
        double mean = 0, var = 0;
        for (size_t i = 0; i < tr.n; i++) hist[tr.y[i]]++;
        for (size_t i = 0; i < tr.n * 784; i++) mean += tr.x[i];
        mean /= (double)tr.n * 784;
        for (size_t i = 0; i < tr.n * 784; i++) var += (tr.x[i] - mean) * (tr.x[i] - mean);
        var /= (double)tr.n * 784;
        int balanced = 1;
        for (int c = 0; c < 10; c++) balanced &= hist[c] == 6000;
        check(balanced, "real train labels: 6000 per class", NULL);
        snprintf(msg, sizeof msg, "mean %.4f, std %.4f", mean, sqrt(var));
        check(fabs(mean) < 0.01 && fabs(sqrt(var) - 1) < 0.02, "real train pixels normalised to mean 0, std 1", msg);
        ds_dataset_free(&tr);
    }
    rc = ds_fashion_load(dir, "t10k", &te, err, sizeof err);
    check(rc == 0 && te.n == 10000, "real Fashion-MNIST t10k: 10000 images", rc ? err : NULL);
    if (rc == 0) ds_dataset_free(&te);
}

static void test_sampler(void) {
    size_t lens[] = {10, 11, 7, 1, 3};
    int ok_cover = 1, ok_drop = 1, ok_det = 1, ok_epoch = 0;
    for (size_t li = 0; li < 5; li++) {
        for (int world = 1; world <= 4; world++) {
            size_t len = lens[li];
            size_t *seen = calloc(len, sizeof *seen), total = 0;
            for (int r = 0; r < world; r++) {
                ds_sampler s;
                ds_sampler_init(&s, len, world, r, 42, true, false);
                size_t *idx = malloc((s.num_samples + 1) * sizeof *idx), *again = malloc((s.num_samples + 1) * sizeof *idx);
                ds_sampler_indices(&s, 3, idx);
                ds_sampler_indices(&s, 3, again);
                ok_det &= memcmp(idx, again, s.num_samples * sizeof *idx) == 0;
                for (size_t i = 0; i < s.num_samples; i++) seen[idx[i]]++, total++;
                ds_sampler_indices(&s, 4, again);
                if (len > 3 && memcmp(idx, again, s.num_samples * sizeof *idx) != 0) ok_epoch = 1;
                /* drop_last: floor(len / world) each, no index twice */
                ds_sampler sd;
                ds_sampler_init(&sd, len, world, r, 42, true, true);
                ok_drop &= sd.num_samples == (len % world ? len / world : len / world);
                free(idx), free(again);
            }
            size_t padded = (len + world - 1) / world * world;
            ok_cover &= total == padded;
            for (size_t i = 0; i < len; i++) ok_cover &= seen[i] >= 1 && seen[i] <= (padded + len - 1) / len;
            free(seen);
        }
    }
    check(ok_cover, "sampler: ranks together cover every index, padded to a multiple of the world size", NULL);
    check(ok_drop, "sampler: drop_last gives floor(len / world) per rank", NULL);
    check(ok_det, "sampler: the same (seed, epoch) gives the same indices", NULL);
    check(ok_epoch, "sampler: a new epoch reshuffles", NULL);
    /* no shuffle: rank r takes r, r + world, ... and the padding repeats the head */
    ds_sampler s;
    ds_sampler_init(&s, 10, 4, 2, 1, false, false);
    size_t idx[3];
    ds_sampler_indices(&s, 0, idx);
    check(s.num_samples == 3 && idx[0] == 2 && idx[1] == 6 && idx[2] == 0,
          "sampler without shuffle: rank 2 of 4 over 10 takes 2, 6, 0 (padding repeats the head)", NULL);
}

static void test_synthetic(void) {
    ds_dataset a, b;
    ds_synthetic(&a, 50, 16, 10, 7);
    ds_synthetic(&b, 50, 16, 10, 7);
    int same = memcmp(a.x, b.x, 50 * 16 * sizeof(float)) == 0 && memcmp(a.y, b.y, 50 * sizeof(int)) == 0;
    int inrange = 1;
    for (int i = 0; i < 50; i++) inrange &= a.y[i] >= 0 && a.y[i] < 10;
    check(same && inrange, "synthetic data: deterministic for a seed, labels in range", NULL);
    ds_dataset_free(&a);
    ds_dataset_free(&b);
}

int main(int argc, char **argv) {
    g_tmp = argc > 1 ? argv[1] : "/tmp";
    /* raw parser edge cases */
    uint8_t b[64];
    ds_idx idx;
    char err[256];
    uint32_t dims[2] = {2, 3};
    size_t n = idx_bytes(b, 2, dims, 0);
    check(ds_idx_parse(b, n, 2, &idx, err, sizeof err) == 0 && idx.count == 6 && idx.dims[1] == 3,
          "IDX parser: a 2x3 file", NULL);
    check(ds_idx_parse(b, 3, 0, &idx, err, sizeof err) != 0, "IDX parser: 3 bytes is not a file", err);
    b[2] = 0x0D;
    check(ds_idx_parse(b, n, 0, &idx, err, sizeof err) != 0 && strstr(err, "element type"),
          "IDX parser: float element type refused", err);
    b[2] = 8;
    b[3] = 9;
    check(ds_idx_parse(b, n, 0, &idx, err, sizeof err) != 0 && strstr(err, "rank"), "IDX parser: rank 9 refused", err);
    uint8_t big[12] = {0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    check(ds_idx_parse(big, 12, 0, &idx, err, sizeof err) != 0 && strstr(err, "too large"),
          "IDX parser: overflowing dimensions refused", err);
    test_files();
    test_real();
    test_sampler();
    test_synthetic();
    return g_failed ? 1 : 0;
}
