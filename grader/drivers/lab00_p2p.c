/* lab00_p2p.c - Lab 0's ping-pong sweep between every ordered pair of ranks: latency and
 * bandwidth per message size, every message checked byte for byte; the matrices of the
 * report and the JSON that `make calibrate` reads. */
#include <stdlib.h>
#include <string.h>

#include "lab00.h"

/* v[0..n) summed over all ranks, in place (host memory). */
static void sum_floats(float *v, size_t n) {
    float *d = pl_malloc_floats(n);
    pl_upload(d, v, n * sizeof(float));
    pl_allreduce(d, d, n, PL_SUM, pl_comm_world(), NULL);
    pl_device_sync();
    pl_download(v, d, n * sizeof(float));
    pl_free(d);
}

/* ------------------------------------------------------------------ section 5: ping-pong */

static void fill_pattern(float *h, size_t count, int src, int dst, int iter) {
    for (size_t i = 0; i < count; i++)
        h[i] = (float)((i * 7 + (size_t)(iter + 1000) * 13 + (size_t)src * 5 + (size_t)dst * 3) % 251);
}

static size_t wrong_bytes(const void *got, const void *want, size_t bytes) {
    const unsigned char *g = got, *w = want;
    size_t n = 0;
    for (size_t i = 0; i < bytes; i++) n += g[i] != w[i];
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int warmup(void) { return drv_opts()->warmup >= 0 ? drv_opts()->warmup : DEFAULT_WARMUP; }

int iters_for(size_t bytes) {
    if (drv_opts()->iters > 0) return drv_opts()->iters;
    size_t n = ((size_t)64 << 20) / (bytes ? bytes : 1); /* about 64 MiB moved per size */
    return n < 10 ? 10 : n > 50 ? 50 : (int)n;
}

/* One message size between src and dst. src sends, dst echoes what it received, src times
 * the round trip. Before each timed round dst sends src a one-float token, so the clock
 * starts only once dst is ready to receive (its checking of the previous round is not
 * counted). Both ranks check every message they receive; the echo checks both legs.
 * On src, *latency_us is the median one-way time; on both, *wrong the wrong bytes seen. */
static void pingpong(int src, int dst, size_t count, int warmup, int iters, p2p_buffers *b,
                     double *latency_us, double *wrong) {
    pl_comm *w = pl_comm_world();
    int me = pl_rank();
    size_t bytes = count * sizeof(float);
    *latency_us = 0;
    *wrong = 0;
    for (int it = -warmup; it < iters; it++) {
        fill_pattern(b->h_want, count, src, dst, it);
        pl_poison(b->d_in, count, NULL);
        if (me == src) {
            pl_upload(b->d_out, b->h_want, bytes);
            pl_device_sync();
            pl_recv(b->d_token, 1, dst, w, NULL);
            pl_stream_sync(NULL);
            double t0 = pl_now();
            pl_send(b->d_out, count, dst, w, NULL);
            pl_recv(b->d_in, count, dst, w, NULL);
            pl_stream_sync(NULL);
            double t1 = pl_now();
            if (it >= 0) b->times[it] = t1 - t0;
        } else {
            pl_device_sync();
            pl_send(b->d_token, 1, src, w, NULL);
            pl_recv(b->d_in, count, src, w, NULL);
            pl_send(b->d_in, count, src, w, NULL);
            pl_stream_sync(NULL);
        }
        pl_download(b->h_got, b->d_in, bytes);
        *wrong += (double)wrong_bytes(b->h_got, b->h_want, bytes);
    }
    if (me == src && iters > 0) {
        qsort(b->times, (size_t)iters, sizeof *b->times, cmp_double);
        double median = iters % 2 ? b->times[iters / 2]
                                  : 0.5 * (b->times[iters / 2 - 1] + b->times[iters / 2]);
        *latency_us = median / 2 * 1e6;
    }
}

void print_sweep_header(void) {
    drv_print("  %-8s %12s %6s %12s %14s %8s\n", "pair", "bytes", "iters", "latency_us",
              "bandwidth_GB/s", "wrong");
}

/* The sweep for one ordered pair; every rank takes part in the barriers and sums, so the
 * results reach rank 0 and no rank waits longer than one message size. */
void sweep_pair(const size_t *sizes, size_t n_sizes, p2p_buffers *b, p2p_pair *p) {
    int me = pl_rank();
    p->n = 0;
    for (size_t k = 0; k < n_sizes; k++) {
        size_t count = sizes[k], bytes = count * sizeof(float);
        int iters = iters_for(bytes);
        double lat = 0, wrong = 0;
        pl_barrier(pl_comm_world());
        if (me == p->src || me == p->dst)
            pingpong(p->src, p->dst, count, warmup(), iters, b, &lat, &wrong);
        float v[2] = {(float)lat, (float)wrong};
        sum_floats(v, 2);
        p2p_point *pt = &p->pt[p->n++];
        pt->bytes = bytes;
        pt->iters = iters;
        pt->latency_us = v[0];
        pt->bandwidth_gbps = v[0] > 0 ? (double)bytes / (v[0] * 1e-6) / 1e9 : 0;
        pt->wrong_bytes = v[1];
        {
            char pair[24];
            snprintf(pair, sizeof pair, "%d->%d", p->src, p->dst);
            drv_print("  %-8s %12zu %6d %12.2f %14.3f %8.0f\n", pair, bytes, iters, pt->latency_us,
                      pt->bandwidth_gbps, pt->wrong_bytes);
        }
    }
}

/* The fields of one pair's case. Besides this lab's own it fills the ones the grading
 * engine shows: busbw (= algbw for point-to-point, as in nccl-tests), time_us, and on
 * failure wrong/count (bytes). */
void report_pair(drv_case *c, const p2p_pair *p) {
    double wrong = 0, checked = 0, peak = 0;
    size_t first_bad = 0;
    for (int k = 0; k < p->n; k++) {
        const p2p_point *pt = &p->pt[k];
        if (pt->wrong_bytes > 0 && wrong == 0) first_bad = pt->bytes;
        wrong += pt->wrong_bytes;
        checked += 2.0 * (double)pt->bytes * (warmup() + pt->iters); /* both ranks check */
        if (pt->bandwidth_gbps > peak) peak = pt->bandwidth_gbps;
    }
    const p2p_point *small = &p->pt[0], *large = &p->pt[p->n - 1];
    drv_num(c, "src", p->src);
    drv_num(c, "dst", p->dst);
    drv_num(c, "same_host", p->same_host);
    drv_num(c, "latency_us", small->latency_us);
    drv_num(c, "latency_bytes", (double)small->bytes);
    drv_num(c, "bandwidth_GBps", large->bandwidth_gbps);
    drv_num(c, "peak_bandwidth_GBps", peak);
    drv_num(c, "bytes", (double)large->bytes);
    drv_num(c, "time_us", large->latency_us);
    drv_num(c, "algbw", large->bandwidth_gbps);
    drv_num(c, "busbw", large->bandwidth_gbps);
    drv_num(c, "wrong", wrong);
    drv_num(c, "count", checked);
    if (wrong > 0)
        drv_fail(c, "bytes altered between ranks %d and %d, first at %zu-byte messages", p->src, p->dst, first_bad);
}

/* Latency at the smallest size and bandwidth at the largest, as src x dst matrices. */
void print_matrices(const p2p_pair *pairs, int n_pairs) {
    int world = pl_world();
    if (n_pairs == 0 || world > 16) return;
    for (int which = 0; which < 2; which++) {
        const p2p_point *ref = which == 0 ? &pairs[0].pt[0] : &pairs[0].pt[pairs[0].n - 1];
        drv_print("== %s, %zu-byte messages (row: sender, column: receiver) ==\n",
                  which == 0 ? "latency in us" : "bandwidth in GB/s", ref->bytes);
        drv_print("  %6s", "");
        for (int d = 0; d < world; d++) drv_print(" %9d", d);
        drv_print("\n");
        for (int s = 0; s < world; s++) {
            drv_print("  %6d", s);
            for (int d = 0; d < world; d++) {
                const p2p_pair *p = NULL;
                for (int i = 0; i < n_pairs; i++)
                    if (pairs[i].src == s && pairs[i].dst == d) p = &pairs[i];
                if (!p) {
                    drv_print(" %9s", s == d ? "." : "-");
                    continue;
                }
                const p2p_point *pt = which == 0 ? &p->pt[0] : &p->pt[p->n - 1];
                drv_print(" %9.2f", which == 0 ? pt->latency_us : pt->bandwidth_gbps);
            }
            drv_print("\n");
        }
    }
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* The sweep as JSON, for calibrating a "this machine" cost-model profile (rank 0 writes). */
void write_p2p_json(const char *path, const rank_card *cards, const p2p_pair *pairs,
                           int n_pairs) {
    if (pl_rank() != 0) return;
    FILE *f = fopen(path, "w");
    if (!f) {
        pl_log("cannot write --p2p-json %s", path);
        return;
    }
    const pl_runtime_info *in = pl_info();
    fprintf(f, "{\n  \"lab\": \"00-hello\",\n  \"world\": %d,\n  \"nodes\": %d,\n", in->world, in->nodes);
    fprintf(f, "  \"device\": \"%s\",\n  \"comm\": \"%s\",\n  \"hosts\": [", pl_device_name(in->device),
            pl_comm_name(in->comm));
    for (int r = 0; r < in->world; r++) {
        if (r) fputs(", ", f);
        json_string(f, cards[r].host);
    }
    fputs("],\n  \"latency\": \"one-way, half the median round trip, microseconds\",\n", f);
    fputs("  \"bandwidth\": \"bytes / one-way time, GB/s (1e9 bytes)\",\n  \"pairs\": [", f);
    for (int i = 0; i < n_pairs; i++) {
        const p2p_pair *p = &pairs[i];
        fprintf(f, "%s\n    {\"src\": %d, \"dst\": %d, \"same_host\": %s, \"points\": [", i ? "," : "",
                p->src, p->dst, p->same_host ? "true" : "false");
        for (int k = 0; k < p->n; k++) {
            const p2p_point *pt = &p->pt[k];
            fprintf(f, "%s\n      {\"bytes\": %zu, \"iters\": %d, \"latency_us\": %.3f, "
                       "\"bandwidth_GBps\": %.6f, \"wrong_bytes\": %.0f}",
                    k ? "," : "", pt->bytes, pt->iters, pt->latency_us, pt->bandwidth_gbps,
                    pt->wrong_bytes);
        }
        fputs("\n    ]}", f);
    }
    fputs("\n  ]\n}\n", f);
    if (fclose(f) != 0) pl_log("error writing --p2p-json %s", path);
    else drv_print("p2p results written to %s\n", path);
}

