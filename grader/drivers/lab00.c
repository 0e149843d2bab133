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
#include <stdlib.h>
#include <string.h>

#include "lab00.h" // defines: rank_card, the ping-pong sweep (lab00_p2p.c); brings in driver.h
#ifdef PL_HAVE_CUDA
#include "pl_cuda_info.h" // defines: pl_cuda_versions, pl_cuda_device_describe, pl_cuda_link_matrix
#endif

/* ------------------------------------------------------------------ who is who */

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
