/* lab00.c - Lab 0: hello, parallel world. A tour of the harness and the smoke test of a
 * setup: the driver of Lab 0, which has no student files.
 *
 * Nothing to implement: read it, run it, and read what it prints (labs/00-hello/README.md
 * explains each section). It shows, from rank 0:
 *   1. the backends the harness chose (cpu|cuda, mpi|nccl) and why;
 *   2. the versions it can see (CUDA driver/runtime and NCCL in a CUDA build);
 *   3. every rank: host, local rank, device, GPU;
 *   4. the links between the GPUs of rank 0's node (CUDA builds with GPUs);
 *   5. a ping-pong sweep between every ordered pair of ranks: latency and bandwidth per
 *      message size, every message checked byte for byte.
 * The grader runs it like any lab driver: case "topology" and one case "p2p.<a>-<b>" per
 * ordered pair, which pass when every rank reported and every byte arrived intact.
 *
 * Lab flags (besides the common -b/-e/-f/-w/-n/-q/--filter, see --help):
 *   --p2p-json FILE   also write the sweep as JSON (to calibrate a cost-model profile)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h" // defines: drv_main, drv_sizes, drv_fail, drv_num, drv_print; brings in pl.h
#ifdef PL_HAVE_CUDA
#include "pl_cuda_info.h" // defines: pl_cuda_versions, pl_cuda_device_describe, pl_cuda_link_matrix
#endif

#define MAX_SIZES 64
#define HOST_CHARS 64
#define GPU_CHARS 128
#define DEFAULT_MAX_BYTES (4u << 20)
#define DEFAULT_WARMUP 2

/* ------------------------------------------------------------------ who is who */

/* One rank's self-description. It travels through pl_allgather as floats: numbers as they
 * are, text one character per float (exact for 0..255), so no string call is needed. */
typedef struct {
    int rank, local_rank, local_world, nodes, device, comm, cuda_device, gpus;
    char host[HOST_CHARS];
    char gpu[GPU_CHARS];
} rank_card;

enum { CARD_INTS = 8, CARD_FLOATS = CARD_INTS + HOST_CHARS + GPU_CHARS };

static void text_to_floats(const char *s, float *out, size_t n) {
    size_t i = 0;
    for (; i + 1 < n && s[i]; i++) out[i] = (float)(unsigned char)s[i];
    for (; i < n; i++) out[i] = 0.0f;
}

static void floats_to_text(const float *in, char *s, size_t n) {
    size_t i = 0;
    /* A poisoned (NaN) or out-of-range value ends the text: the rank never wrote it. */
    for (; i + 1 < n && in[i] >= 1.0f && in[i] <= 255.0f; i++) s[i] = (char)(unsigned char)in[i];
    s[i] = 0;
}

static void card_pack(const rank_card *c, float *f) {
    const int v[CARD_INTS] = {c->rank,   c->local_rank,  c->local_world, c->nodes,
                              c->device, c->comm,        c->cuda_device, c->gpus};
    for (int i = 0; i < CARD_INTS; i++) f[i] = (float)v[i];
    text_to_floats(c->host, f + CARD_INTS, HOST_CHARS);
    text_to_floats(c->gpu, f + CARD_INTS + HOST_CHARS, GPU_CHARS);
}

static void card_unpack(const float *f, rank_card *c) {
    int *v[CARD_INTS] = {&c->rank,   &c->local_rank,  &c->local_world, &c->nodes,
                         &c->device, &c->comm,        &c->cuda_device, &c->gpus};
    /* NaN (poison: the rank sent nothing) becomes -1. */
    for (int i = 0; i < CARD_INTS; i++) *v[i] = f[i] == f[i] ? (int)f[i] : -1;
    floats_to_text(f + CARD_INTS, c->host, HOST_CHARS);
    floats_to_text(f + CARD_INTS + HOST_CHARS, c->gpu, GPU_CHARS);
}

static rank_card my_card(void) {
    const pl_runtime_info *in = pl_info();
    rank_card c = {.rank = in->rank, .local_rank = in->local_rank, .local_world = in->local_world,
                   .nodes = in->nodes, .device = in->device, .comm = in->comm,
                   .cuda_device = in->cuda_device, .gpus = in->gpus_on_node};
    snprintf(c.host, sizeof c.host, "%s", in->host);
    snprintf(c.gpu, sizeof c.gpu, "-");
#ifdef PL_HAVE_CUDA
    if (in->cuda_device >= 0 && pl_cuda_device_describe(in->cuda_device, c.gpu, sizeof c.gpu) != 0)
        snprintf(c.gpu, sizeof c.gpu, "GPU %d (no description)", in->cuda_device);
#endif
    return c;
}

/* Every rank's `n` host floats, gathered into out[world * n] on every rank. The receive
 * buffer is poisoned first, so a rank that sent nothing shows up as NaN. */
static void gather_floats(const float *mine, float *out, size_t n) {
    size_t world = (size_t)pl_world();
    float *d_mine = pl_malloc_floats(n), *d_all = pl_malloc_floats(n * world);
    pl_upload(d_mine, mine, n * sizeof(float));
    pl_poison(d_all, n * world, NULL);
    pl_allgather(d_mine, d_all, n, pl_comm_world(), NULL);
    pl_device_sync();
    pl_download(out, d_all, n * world * sizeof(float));
    pl_free(d_mine);
    pl_free(d_all);
}

/* v[0..n) summed over all ranks, in place (host memory). */
static void sum_floats(float *v, size_t n) {
    float *d = pl_malloc_floats(n);
    pl_upload(d, v, n * sizeof(float));
    pl_allreduce(d, d, n, PL_SUM, pl_comm_world(), NULL);
    pl_device_sync();
    pl_download(v, d, n * sizeof(float));
    pl_free(d);
}

/* ------------------------------------------------------------------ sections 1-4 */

static const char *launcher(void) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return "Open MPI mpirun";
    if (getenv("SLURM_STEP_ID") || getenv("SLURM_JOB_ID")) return "Slurm";
    if (getenv("PMI_RANK") || getenv("PMIX_RANK")) return "a PMI launcher";
    return "a single process (no launcher)";
}

static void print_backends(void) {
    const pl_runtime_info *in = pl_info();
    drv_print("== backends ==\n");
    drv_print("  device  %-5s %s\n", pl_device_name(in->device), in->device_why);
    drv_print("  comm    %-5s %s\n", pl_comm_name(in->comm), in->comm_why);
    drv_print("  seed %llu, watchdog %.0f s, BLAS threads per rank %d, trace %s\n",
              (unsigned long long)in->seed, in->watchdog_sec, in->blas_threads,
              in->trace ? in->trace_path : "off (TRACE=1 to write one)");
}

static void print_versions(void) {
    drv_print("== versions ==\n");
    drv_print("  launched by   %s (MPI version: `mpirun --version`, or `make doctor`)\n", launcher());
#ifdef PL_HAVE_CUDA
    char buf[160];
    pl_cuda_versions(buf, sizeof buf);
    drv_print("  CUDA          %s\n", buf);
#ifdef PL_HAVE_NCCL
    pl_nccl_version(buf, sizeof buf);
    drv_print("  NCCL          %s\n", buf);
#else
    drv_print("  NCCL          not in this build (NO_NCCL=1, or nccl.h was not found)\n");
#endif
#else
    drv_print("  CUDA, NCCL    not in this build (the cpu flavour; nvcc was not used)\n");
#endif
}

/* Gathers every rank's card; prints the table; returns the verdict's message (NULL: pass). */
static const char *topology(rank_card *cards, char *why, size_t why_len) {
    int world = pl_world();
    float mine[CARD_FLOATS];
    rank_card me = my_card();
    card_pack(&me, mine);
    float *all = malloc((size_t)world * CARD_FLOATS * sizeof(float));
    PL_CHECK(all != NULL, "out of host memory");
    gather_floats(mine, all, CARD_FLOATS);
    for (int r = 0; r < world; r++) card_unpack(all + (size_t)r * CARD_FLOATS, &cards[r]);
    free(all);

    drv_print("== ranks ==\n");
    drv_print("  %4s  %-20s %5s  %-6s %-4s  %s\n", "rank", "host", "local", "device", "comm", "GPU");
    int hosts = 0;
    for (int r = 0; r < world; r++) {
        const rank_card *c = &cards[r];
        drv_print("  %4d  %-20s %2d/%-2d  %-6s %-4s  %s\n", r, c->host, c->local_rank, c->local_world,
                  c->device >= 0 ? pl_device_name((pl_device_kind)c->device) : "?",
                  c->comm >= 0 ? pl_comm_name((pl_comm_kind)c->comm) : "?", c->gpu);
        bool first_on_host = true;
        for (int q = 0; q < r; q++)
            if (!strcmp(cards[q].host, c->host)) first_on_host = false;
        hosts += first_on_host;
    }
    drv_print("  %d rank(s) on %d host(s)\n", world, hosts);

    /* Checks: every rank answered, and they agree on the backends and the node count. */
    for (int r = 0; r < world; r++) {
        const rank_card *c = &cards[r];
        if (c->rank != r || !c->host[0]) {
            snprintf(why, why_len, "rank %d did not report (its entry is empty)", r);
            return why;
        }
        if (c->device != cards[0].device || c->comm != cards[0].comm) {
            snprintf(why, why_len, "rank %d runs %s+%s but rank 0 runs %s+%s", r,
                     pl_device_name((pl_device_kind)c->device), pl_comm_name((pl_comm_kind)c->comm),
                     pl_device_name((pl_device_kind)cards[0].device),
                     pl_comm_name((pl_comm_kind)cards[0].comm));
            return why;
        }
        if (c->device == PL_DEVICE_AUTO || c->comm == PL_COMM_AUTO) {
            snprintf(why, why_len, "rank %d has no backend chosen (still 'auto')", r);
            return why;
        }
        if (c->device == PL_DEVICE_CUDA && c->cuda_device < 0) {
            snprintf(why, why_len, "rank %d runs on cuda without a GPU assigned", r);
            return why;
        }
        if (c->local_rank < 0 || c->local_rank >= c->local_world) {
            snprintf(why, why_len, "rank %d: local rank %d of %d", r, c->local_rank, c->local_world);
            return why;
        }
    }
    if (hosts != pl_info()->nodes) {
        snprintf(why, why_len, "the ranks name %d distinct hosts but the runtime counted %d nodes",
                 hosts, pl_info()->nodes);
        return why;
    }
    return NULL;
}

static void print_links(void) {
#ifdef PL_HAVE_CUDA
    if (pl_info()->gpus_on_node <= 0) return;
    char *buf = malloc(16384);
    PL_CHECK(buf != NULL, "out of host memory");
    buf[0] = 0;
    int n = pl_rank() == 0 ? pl_cuda_link_matrix(buf, 16384) : 0;
    drv_print("== GPU links on %s (rank 0's node) ==\n", pl_info()->host);
    if (n < 0) drv_print("  unavailable: %s\n", buf);
    else drv_print("%s%s", buf, buf[0] && buf[strlen(buf) - 1] != '\n' ? "\n" : "");
    free(buf);
#endif
}

/* ------------------------------------------------------------------ section 5: ping-pong */

typedef struct {
    size_t bytes;
    int iters;
    double latency_us;     /* one way: half the median round trip */
    double bandwidth_gbps; /* bytes / one-way time, 1 GB = 1e9 bytes */
    double wrong_bytes;    /* over all iterations, both directions */
} p2p_point;

typedef struct {
    int src, dst;
    bool same_host;
    int n;
    p2p_point pt[MAX_SIZES];
} p2p_pair;

/* The message src sends in iteration `iter`: small integers, exact in float32, different
 * for every pair and iteration so a stale or misrouted buffer is caught. */
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

static int warmup(void) { return drv_opts()->warmup >= 0 ? drv_opts()->warmup : DEFAULT_WARMUP; }

static int iters_for(size_t bytes) {
    if (drv_opts()->iters > 0) return drv_opts()->iters;
    size_t n = ((size_t)64 << 20) / (bytes ? bytes : 1); /* about 64 MiB moved per size */
    return n < 10 ? 10 : n > 50 ? 50 : (int)n;
}

typedef struct {
    float *d_out, *d_in, *d_token; /* device buffers, max size */
    float *h_want, *h_got;         /* host staging */
    double *times;
} p2p_buffers;

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

static void print_sweep_header(void) {
    drv_print("  %-8s %12s %6s %12s %14s %8s\n", "pair", "bytes", "iters", "latency_us",
              "bandwidth_GB/s", "wrong");
}

/* The sweep for one ordered pair; every rank takes part in the barriers and sums, so the
 * results reach rank 0 and no rank waits longer than one message size. */
static void sweep_pair(const size_t *sizes, size_t n_sizes, p2p_buffers *b, p2p_pair *p) {
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
static void report_pair(drv_case *c, const p2p_pair *p) {
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
static void print_matrices(const p2p_pair *pairs, int n_pairs) {
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
static void write_p2p_json(const char *path, const rank_card *cards, const p2p_pair *pairs,
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

/* ------------------------------------------------------------------ the cases */

static const char *g_p2p_json;
static size_t g_sizes[MAX_SIZES], g_nsizes;
static rank_card *g_cards;
static char g_topology_bad[200];
static const char *g_topology_why;
static p2p_pair *g_pairs;
static int g_npairs;
static p2p_buffers g_buf;

/* Everything before the cases: the backends, the versions, and the topology, which the p2p
 * cases need too (same host or not), so it is gathered even when its case is filtered out. */
static void lab0_init(void) {
    int world = pl_world();
    size_t all[MAX_SIZES], n = drv_sizes(all, MAX_SIZES);
    for (size_t k = 0; k < n; k++)
        if (all[k] > 0) g_sizes[g_nsizes++] = all[k]; /* a 0-byte message is a no-op */
    if (world > 1 && g_nsizes == 0) pl_usage_error("no message size between -b and -e is at least 4 bytes");
    drv_print("Lab 0: hello from %d rank(s)\n", world);
    print_backends();
    print_versions();
    g_cards = calloc((size_t)world, sizeof *g_cards);
    g_pairs = calloc((size_t)world * (size_t)world, sizeof *g_pairs);
    PL_CHECK(g_cards && g_pairs, "out of host memory");
    g_topology_why = topology(g_cards, g_topology_bad, sizeof g_topology_bad);
    print_links();
    if (world == 1) {
        drv_print("== point-to-point ==\n  one rank: no pairs to measure (run with NP=2 or more)\n");
        return;
    }
    size_t max_count = g_sizes[g_nsizes - 1];
    int max_iters = 0;
    for (size_t k = 0; k < g_nsizes; k++) {
        int it = iters_for(g_sizes[k] * sizeof(float));
        if (it > max_iters) max_iters = it;
    }
    g_buf = (p2p_buffers){.d_out = pl_malloc_floats(max_count), .d_in = pl_malloc_floats(max_count),
                          .d_token = pl_malloc_floats(1), .h_want = malloc(max_count * sizeof(float)),
                          .h_got = malloc(max_count * sizeof(float)),
                          .times = malloc((size_t)max_iters * sizeof(double))};
    PL_CHECK(g_buf.h_want && g_buf.h_got && g_buf.times, "out of host memory");
    pl_fill(g_buf.d_token, 1.0f, 1, NULL);
    drv_print("== point-to-point: ping-pong between every ordered pair ==\n");
    drv_print("  one-way latency = median round trip / 2; bandwidth = bytes / latency;"
              " wrong = bytes that arrived altered\n");
    print_sweep_header();
}

static void check_topology(drv_case *c) {
    drv_num(c, "world", pl_world());
    drv_num(c, "nodes", pl_info()->nodes);
    drv_note(c, "%s+%s: %s; %s", pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm),
             pl_info()->device_why, pl_info()->comm_why);
    if (g_topology_why) drv_fail(c, "%s", g_topology_why);
}

static void plan_pairs(const drv_test *t, drv_plan *p) {
    for (int s = 0; s < pl_world(); s++)
        for (int d = 0; d < pl_world(); d++)
            if (s != d) {
                drv_instance *in = drv_plan_add(p, t, "p2p.%d-%d", s, d);
                in->arg[0] = s, in->arg[1] = d;
            }
}

static void check_pair(drv_case *c) {
    p2p_pair *p = &g_pairs[g_npairs++];
    p->src = (int)c->arg[0];
    p->dst = (int)c->arg[1];
    p->same_host = !strcmp(g_cards[p->src].host, g_cards[p->dst].host);
    sweep_pair(g_sizes, g_nsizes, &g_buf, p);
    report_pair(c, p);
}

static void lab0_finish(void) {
    if (pl_world() > 1) {
        pl_free(g_buf.d_out);
        pl_free(g_buf.d_in);
        pl_free(g_buf.d_token);
        free(g_buf.h_want);
        free(g_buf.h_got);
        free(g_buf.times);
        print_matrices(g_pairs, g_npairs);
    }
    if (g_p2p_json) write_p2p_json(g_p2p_json, g_cards, g_pairs, g_npairs);
    free(g_pairs);
    free(g_cards);
}

static const drv_test TESTS[] = {
    {.name = "topology", .check = check_topology},
    {.name = "p2p", .plan = plan_pairs, .check = check_pair},
    {NULL},
};
static const drv_flag FLAGS[] = {
    {"--p2p-json", DRV_STR, &g_p2p_json, 0, 0, "FILE   also write the ping-pong sweep as JSON"},
    {NULL},
};
static const drv_options DEFAULTS = {.min_bytes = 4, .max_bytes = DEFAULT_MAX_BYTES, .factor = 2.0,
                                     .warmup = -1, .iters = -1};
static const drv_lab LAB = {
    .name = "00-hello",
    .title = "Lab 0: who runs where, which backends and why, and a ping-pong sweep between every "
             "ordered pair of ranks (default sizes 4 B .. 4 MiB)",
    .flags = FLAGS,
    .tests = TESTS,
    .defaults = &DEFAULTS,
    .init = lab0_init,
    .finish = lab0_finish,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
