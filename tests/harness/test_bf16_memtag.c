/* test_bf16_memtag.c - the harness pieces of sharded data parallelism: the bf16 all-gather
 * and reduce-scatter (out of place, in place, synchronous and on the comm stream, SUM and
 * AVG, odd counts) against a host reference, their counted bytes, and the memory
 * categories (tagged bytes, pl_free leaving its category, peaks).
 * Run at any world size; prints "ok - ..." lines (tap.h). */
#include <stdlib.h>
#include <string.h>

#include "pl_memtag_internal.h" // defines: pl_mem_tag_peak, pl_mem_tag_reset_peaks
#include "tap.h"

/* Rank r's element i: small integers times 2^-4, so every bf16 sum of up to 8 of them is
 * exact and a reduction's order cannot matter. */
static float value(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 13) % 33) - 16) / 16.0f; }

static void test_allgather(size_t n, bool in_place, pl_stream *s, const char *what) {
    int W = pl_world(), me = pl_rank();
    uint16_t *h = malloc(n * W * 2 + 2), *got = malloc(n * W * 2 + 2);
    for (size_t i = 0; i < n; i++) h[i] = pl_bf16_from_float(value(me, i));
    uint16_t *rb = pl_malloc(n * W * 2 + 2), *sb = in_place ? rb + (size_t)me * n : pl_malloc(n * 2 + 2);
    pl_memset(rb, 0xFF, n * W * 2, NULL);
    pl_upload(sb, h, n * 2);
    pl_metrics_reset();
    pl_allgather_bf16(sb, rb, n, pl_comm_world(), s);
    pl_device_sync();
    pl_metrics m;
    pl_metrics_get(&m);
    pl_download(got, rb, n * W * 2);
    int ok = m.coll_calls[PL_OP_ALLGATHER] == 1 && m.coll_bytes == 2 * n * (uint64_t)W;
    for (int r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) ok &= got[(size_t)r * n + i] == pl_bf16_from_float(value(r, i));
    char name[200];
    snprintf(name, sizeof name, "bf16 all-gather of %zu elements %s: every rank's words in rank order, S = %zu bytes", n, what,
             2 * n * (size_t)W);
    tap_check(ok, name);
    if (!in_place) pl_free(sb);
    pl_free(rb);
    free(h), free(got);
}

static void test_reduce_scatter(size_t n, bool in_place, pl_op op, pl_stream *s, const char *what) {
    int W = pl_world(), me = pl_rank();
    size_t total = n * (size_t)W;
    uint16_t *h = malloc(total * 2 + 2), *got = malloc(n * 2 + 2);
    for (size_t i = 0; i < total; i++) h[i] = pl_bf16_from_float(value(me, i));
    uint16_t *sb = pl_malloc(total * 2 + 2), *rb = in_place ? sb + (size_t)me * n : pl_malloc(n * 2 + 2);
    pl_upload(sb, h, total * 2);
    pl_metrics_reset();
    pl_reduce_scatter_bf16(sb, rb, n, op, pl_comm_world(), s);
    pl_device_sync();
    pl_metrics m;
    pl_metrics_get(&m);
    pl_download(got, rb, n * 2);
    int ok = m.coll_calls[PL_OP_REDUCE_SCATTER] == 1 && m.coll_bytes == 2 * total;
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < W; r++) sum += value(r, (size_t)me * n + i);
        float want = op == PL_AVG ? (float)(sum / W) : (float)sum;
        ok &= got[i] == pl_bf16_from_float(want);
    }
    char name[200];
    snprintf(name, sizeof name, "bf16 reduce-scatter (%s) of %zu elements %s: this rank's block of the sum", op == PL_AVG ? "avg" : "sum",
             n, what);
    tap_check(ok, name);
    if (!in_place) pl_free(rb);
    pl_free(sb);
    free(h), free(got);
}

static void test_memtag(void) {
    size_t base = pl_mem_in_use();
    void *a = pl_malloc_tagged(1000, PL_MEM_PARAMS), *b = pl_malloc_tagged(24, PL_MEM_OPTIM), *c = pl_malloc(40);
    int ok = pl_mem_tag_in_use(PL_MEM_PARAMS) == 1000 && pl_mem_tag_in_use(PL_MEM_OPTIM) == 24 &&
             pl_mem_tag_in_use(PL_MEM_GRADS) == 0 && pl_mem_in_use() == base + 1064 &&
             pl_mem_tag_in_use(PL_MEM_UNTAGGED) == pl_mem_in_use() - 1024;
    tap_check(ok, "memory categories: each tagged allocation counts in its category, plain pl_malloc as untagged");
    pl_mem_tag_reset_peaks();
    void *g[3];
    for (int i = 0; i < 3; i++) g[i] = pl_malloc_tagged(100, PL_MEM_GATHER);
    pl_free(g[0]), pl_free(g[1]);
    void *g2 = pl_malloc_tagged(50, PL_MEM_GATHER);
    ok = pl_mem_tag_in_use(PL_MEM_GATHER) == 150 && pl_mem_tag_peak(PL_MEM_GATHER) == 300 && pl_mem_tag_peak(PL_MEM_PARAMS) == 1000;
    tap_check(ok, "memory categories: pl_free takes a buffer out of its category; the peak stays until reset");
    pl_free(g[2]), pl_free(g2), pl_free(a), pl_free(b), pl_free(c);
    ok = pl_mem_in_use() == base;
    for (int t = 1; t < PL_MEM_NTAGS; t++) ok &= pl_mem_tag_in_use((pl_mem_tag)t) == 0;
    /* many allocations: the table grows and shrinks */
    void *many[500];
    for (int i = 0; i < 500; i++) many[i] = pl_malloc_tagged((size_t)i + 1, (pl_mem_tag)(1 + i % 5));
    size_t want = 0;
    for (int i = 0; i < 500; i += 2) pl_free(many[i]);
    for (int i = 1; i < 500; i += 2) want += (size_t)i + 1;
    size_t have = 0;
    for (int t = 1; t < PL_MEM_NTAGS; t++) have += pl_mem_tag_in_use((pl_mem_tag)t);
    ok &= have == want;
    for (int i = 1; i < 500; i += 2) pl_free(many[i]);
    for (int t = 1; t < PL_MEM_NTAGS; t++) ok &= pl_mem_tag_in_use((pl_mem_tag)t) == 0;
    tap_check(ok, "memory categories: back to zero after every free (500 buffers, interleaved frees)");
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    pl_stream *comm = pl_stream_comm();
    size_t sizes[] = {1, 7, 1000};
    for (int k = 0; k < 3; k++) {
        test_allgather(sizes[k], false, NULL, "(out of place)");
        test_allgather(sizes[k], true, comm, "(in place, on the comm stream)");
        test_reduce_scatter(sizes[k], false, PL_SUM, NULL, "(out of place)");
        test_reduce_scatter(sizes[k], true, PL_AVG, comm, "(in place, on the comm stream)");
    }
    test_memtag();
    return tap_finish();
}
