/* lab01.c - the driver of Lab 1 (collectives from send/recv).
 *
 * As in nccl-tests, a collective is one row of small callbacks: its buffer counts, the
 * bus-bandwidth factor, the traffic model, the expected output, the student's call and
 * the library's. The cases are every collective x size x {out-of-place, in-place} (x root
 * for broadcast and reduce); the runner (grader/driver.c) does the rest.
 *
 * Inputs are small integers stored as floats, so every summation order gives the same
 * bits: a result is right only if it is bit-identical to the expected one. Each rank draws
 * its inputs from a seed of its own, fresh for every case in a graded run, and learns the
 * other ranks' seeds only after the student's call: the only way to the right answer is to
 * receive it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h" // defines: the lab API
#include "driver.h"      // defines: drv_* (the case runner)

static int g_n, g_me, g_all_roots_max = 1 << 20;
static const char *g_only;
static pl_comm *g_comm;

/* ================================================================================== */
/* The collectives                                                                    */
/* ================================================================================== */

/* The buffers of one call. In-place layouts follow NCCL: all-gather sends from its own
 * block of the output, reduce-scatter receives into its own block of the input. */
typedef struct {
    const float *send;
    float *recv;
    size_t count; /* the sweep's count: S / 4 */
    size_t block; /* all-gather / reduce-scatter: the per-rank count */
    int root;
} call;

typedef enum { TRAFFIC_RING, TRAFFIC_BUSIEST, TRAFFIC_LOG_STEPS } traffic;

typedef struct {
    const char *name, *redop;
    bool rooted, blocked; /* blocked: all-gather, reduce-scatter (per-rank blocks) */
    traffic model;
    double (*busbw)(int n);
    /* element i of the expected output of rank me, from input(r, j) of every rank */
    float (*expect)(const call *x, size_t i);
    void (*student)(const call *x);
    void (*library)(const call *x);
} coll;

static uint64_t *g_seeds; /* every rank's input seed of the current case (after the call) */

/* The value rank r holds at index i of its send buffer: an integer in [-1023, 1023], so that
 * any sum over up to 8192 ranks is exact in float32 (< 2^24) and two ranks' values rarely
 * coincide (a wrong root or a missing term shows even at one element). */
static float input(int r, size_t i) {
    uint64_t h = (g_seeds[r] ^ (i * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return (float)((int)((h >> 33) % 2047) - 1023);
}
static float sum_over_ranks(size_t i) {
    float s = 0;
    for (int r = 0; r < g_n; r++) s += input(r, i);
    return s;
}

static double bus_whole(int n) { (void)n; return 1.0; }
static double bus_ring(int n) { return (double)(n - 1) / n; }
static double bus_allreduce(int n) { return 2.0 * (n - 1) / n; }

static float exp_broadcast(const call *x, size_t i) { return input(x->root, i); }
static float exp_sum(const call *x, size_t i) { (void)x; return sum_over_ranks(i); }
static float exp_allgather(const call *x, size_t i) { return input((int)(i / x->block), i % x->block); }
static float exp_reduce_scatter(const call *x, size_t i) { return sum_over_ranks((size_t)g_me * x->block + i); }

static void st_broadcast(const call *x) { lab_broadcast(x->send, x->recv, x->count, x->root, g_comm, NULL); }
static void st_reduce(const call *x) { lab_reduce(x->send, x->recv, x->count, x->root, g_comm, NULL); }
static void st_allgather(const call *x) { lab_allgather(x->send, x->recv, x->block, g_comm, NULL); }
static void st_reduce_scatter(const call *x) { lab_reduce_scatter(x->send, x->recv, x->block, g_comm, NULL); }
static void st_ring(const call *x) { lab_allreduce_ring(x->send, x->recv, x->count, g_comm, NULL); }
static void st_rd(const call *x) { lab_allreduce_rd(x->send, x->recv, x->count, g_comm, NULL); }
static void st_allreduce(const call *x) { lab_allreduce(x->send, x->recv, x->count, g_comm, NULL); }

static void lib_broadcast(const call *x) { pl_broadcast(x->send, x->recv, x->count, x->root, g_comm, NULL); }
static void lib_reduce(const call *x) { pl_reduce(x->send, x->recv, x->count, PL_SUM, x->root, g_comm, NULL); }
static void lib_allgather(const call *x) { pl_allgather(x->send, x->recv, x->block, g_comm, NULL); }
static void lib_reduce_scatter(const call *x) { pl_reduce_scatter(x->send, x->recv, x->block, PL_SUM, g_comm, NULL); }
static void lib_allreduce(const call *x) { pl_allreduce(x->send, x->recv, x->count, PL_SUM, g_comm, NULL); }

static const coll COLLS[] = {
    {"broadcast", "none", true, false, TRAFFIC_BUSIEST, bus_whole, exp_broadcast, st_broadcast, lib_broadcast},
    {"reduce", "sum", true, false, TRAFFIC_BUSIEST, bus_whole, exp_sum, st_reduce, lib_reduce},
    {"allgather", "none", false, true, TRAFFIC_RING, bus_ring, exp_allgather, st_allgather, lib_allgather},
    {"reduce_scatter", "sum", false, true, TRAFFIC_RING, bus_ring, exp_reduce_scatter, st_reduce_scatter, lib_reduce_scatter},
    {"allreduce_ring", "sum", false, false, TRAFFIC_RING, bus_allreduce, exp_sum, st_ring, lib_allreduce},
    {"allreduce_rd", "sum", false, false, TRAFFIC_LOG_STEPS, bus_allreduce, exp_sum, st_rd, lib_allreduce},
    {"allreduce", "sum", false, false, TRAFFIC_RING, bus_allreduce, exp_sum, st_allreduce, lib_allreduce},
};
#define NCOLLS (sizeof COLLS / sizeof COLLS[0])

/* Elements of the send and receive buffers; the whole buffer S counts the larger one. */
static size_t send_count(const coll *k, const call *x) {
    return k->blocked && k->expect == exp_allgather ? x->block : k->blocked ? x->block * g_n : x->count;
}
static size_t recv_count(const coll *k, const call *x) {
    return k->blocked && k->expect == exp_allgather ? x->block * g_n : k->blocked ? x->block : x->count;
}

/* ================================================================================== */
/* One case: arg[0] collective, arg[1] count, arg[2] root, arg[3] in place            */
/* ================================================================================== */

typedef struct {
    const coll *k;
    call x;
    float *base, *send_alloc;
    float *h_in;     /* this rank's send buffer on the host */
    size_t nsend, nrecv, bytes;
    bool in_place;
    double wrong;    /* wrong elements over all ranks */
    double batch_us, median_us, lib_us; /* perf: nccl-tests' time; the grading basis */
} lab1_case;

static void lab1_setup(drv_case *c) {
    lab1_case *s = drv_state(c, sizeof *s);
    s->k = &COLLS[c->arg[0]];
    s->in_place = c->arg[3];
    s->x = (call){.count = (size_t)c->arg[1], .block = (size_t)c->arg[1] / (size_t)g_n, .root = (int)c->arg[2]};
    s->nsend = send_count(s->k, &s->x), s->nrecv = recv_count(s->k, &s->x);
    s->bytes = 4 * (s->nsend > s->nrecv ? s->nsend : s->nrecv);
    g_seeds[g_me] = drv_case_seed(c); /* this rank's inputs: the others learn it in the check */
    s->h_in = malloc((s->nsend + 1) * sizeof(float));
    PL_CHECK(s->h_in != NULL, "out of host memory");
    for (size_t i = 0; i < s->nsend; i++) s->h_in[i] = input(g_me, i);
    size_t mine = s->k->blocked ? (size_t)g_me * s->x.block : 0, total = s->nsend > s->nrecv ? s->nsend : s->nrecv;
    if (!s->in_place) {
        s->send_alloc = pl_malloc_floats(s->nsend);
        s->base = drv_poisoned(s->nrecv);
        pl_upload(s->send_alloc, s->h_in, s->nsend * sizeof(float));
        s->x.send = s->send_alloc, s->x.recv = s->base;
        return;
    }
    s->base = drv_poisoned(total);
    bool gather = s->k->expect == exp_allgather;
    s->x.send = s->base + (gather ? mine : 0);
    s->x.recv = s->base + (gather ? 0 : mine);
    if (!s->k->rooted || s->k->expect != exp_broadcast || g_me == s->x.root)
        pl_upload(s->base + (gather ? mine : 0), s->h_in, s->nsend * sizeof(float));
}

static void lab1_run(drv_case *c) {
    lab1_case *s = c->state;
    s->k->student(&s->x);
}

static void lab1_check(drv_case *c) {
    lab1_case *s = c->state;
    drv_allgather_u64(g_seeds[g_me], g_seeds); /* only now: every rank's inputs */
    bool checked = !(s->k->expect == exp_sum && s->k->rooted && g_me != s->x.root); /* reduce: root only */
    double wrong = 0, first = -1, exp_v = 0, got_v = 0, send_wrong = 0;
    float *got = malloc((s->nrecv + s->nsend + 1) * sizeof(float));
    PL_CHECK(got != NULL, "out of host memory");
    if (checked && s->nrecv) {
        pl_download(got, s->x.recv, s->nrecv * sizeof(float));
        for (size_t i = 0; i < s->nrecv; i++) {
            float e = s->k->expect(&s->x, i);
            if (memcmp(&got[i], &e, sizeof e) == 0) continue;
            if (wrong++ == 0) first = (double)i, exp_v = e, got_v = got[i];
        }
    }
    if (!s->in_place && s->nsend) { /* the send buffer is const */
        pl_download(got, s->x.send, s->nsend * sizeof(float));
        send_wrong = memcmp(got, s->h_in, s->nsend * sizeof(float)) != 0;
    }
    free(got);
    double total = s->wrong = drv_sum(wrong);
    drv_num(c, "count", (double)s->x.count);
    drv_num(c, "bytes", (double)s->bytes);
    drv_num(c, "wrong", total);
    if (total > 0) {
        drv_num(c, "first_wrong", drv_max(wrong > 0 ? first : -1));
        if (wrong > 0)
            drv_fail(c, "%.0f wrong element(s) in all; here at index %.0f: expected %g, got %g%s", total, first, exp_v,
                     got_v, isnan(got_v) ? " (never written?)" : "");
    } else if (drv_sum(send_wrong) > 0) {
        drv_fail(c, "the send buffer was modified; it is const");
    }
}

static int ceil_log2(int n) {
    int s = 0;
    while ((1 << s) < n) s++;
    return s;
}

/* Counted traffic against the optimum of REFERENCE.md; latency-optimal all-reduces by
 * messages (ceil(log2 n) per rank: the fold of a non-power of two is in the ceiling). */
static void lab1_model(drv_case *c, drv_model *m) {
    lab1_case *s = c->state;
    m->no_collectives = true;
    bool small = !strcmp(s->k->name, "allreduce") && s->bytes < LAB_ALLREDUCE_SMALL_BYTES;
    if (s->k->model == TRAFFIC_LOG_STEPS || small) {
        m->msgs_optimal = s->x.count ? ceil_log2(g_n) : 0;
        drv_num(c, "msgs_ratio", 1.0); /* replaced when messages were expected */
        return;
    }
    if (g_n == 1 || s->x.count == 0 || (s->k->blocked && s->x.block == 0)) return;
    double moved = s->k->blocked ? 4.0 * (double)s->x.block * g_n : (double)s->bytes;
    m->bytes_agg = s->k->model == TRAFFIC_RING ? DRV_BYTES_AVG : DRV_BYTES_MAX;
    m->bytes_optimal = s->k->model == TRAFFIC_RING ? s->k->busbw(g_n) * moved : moved;
}

/* ================================================================================== */
/* The nccl-tests table: one line per size (and root), out-of-place then in-place     */
/* ================================================================================== */

typedef struct {
    call x;
    const coll *k;
    bool lib;
} timed;
static void run_timed(void *arg) {
    timed *t = arg;
    (t->lib ? t->k->library : t->k->student)(&t->x);
}

/* The table line being filled: one (collective, size, root), out-of-place and in-place. */
static struct {
    const coll *k;
    size_t count, block, bytes;
    int root;
    bool open;
    double batch_us[2], wrong[2], median_us, lib_us;
} g_row;
static double g_busbw_sum;
static int g_busbw_n;

static void lab1_perf(drv_case *c) {
    lab1_case *s = c->state;
    if (s->k->rooted && s->x.root != 0) return; /* nccl-tests times root 0 */
    int ip = s->in_place, iters = drv_iters_for(s->bytes), warm = drv_opts()->warmup >= 0 ? drv_opts()->warmup : 1;
    timed t = {s->x, s->k, false};
    s->batch_us = pl_time_batch(run_timed, &t, warm, iters, g_comm);
    if (ip) return;
    /* The grading basis: median over iterations of the slowest rank, against the library. */
    double med = s->median_us = drv_time(run_timed, &t, warm, iters).median_us;
    t.lib = true;
    double lib = s->lib_us = drv_time(run_timed, &t, warm, iters).median_us;
    double algbw = s->bytes / med / 1e3;
    drv_num(c, "time_us", med);
    drv_num(c, "nccl_time_us", s->batch_us);
    drv_num(c, "lib_time_us", lib);
    drv_num(c, "algbw", algbw);
    drv_num(c, "busbw", algbw * s->k->busbw(g_n));
    drv_num(c, "lib_busbw", s->bytes / lib / 1e3 * s->k->busbw(g_n));
    if (g_n > 1) drv_num(c, "speed_ratio", lib / med); /* one rank has nothing to compare */
}

static void lab1_teardown(drv_case *c) {
    lab1_case *s = c->state;
    pl_free(s->send_alloc);
    pl_free(s->base);
    free(s->h_in);
}

static void column(char *out, size_t n, int ip) {
    double t = g_row.batch_us[ip];
    if (t <= 0) {
        snprintf(out, n, "%9s %8s %8s %6.0f", "-", "-", "-", g_row.wrong[ip]);
        return;
    }
    double algbw = g_row.bytes / t / 1e3, busbw = algbw * g_row.k->busbw(g_n);
    snprintf(out, n, "%9.1f %8.3f %8.3f %6.0f", t, algbw, busbw, g_row.wrong[ip]);
    g_busbw_sum += busbw;
    g_busbw_n++;
}

/* The count column is nccl-tests' per-rank count for all-gather and reduce-scatter (the
 * block; not rounded down to 4 elements as nccl-tests does: odd blocks are the edge cases
 * a student's chunking must survive, see the handout). */
static void flush_row(void) {
    if (!g_row.open) return;
    char oop[64], ip[64], med[24] = "-", lib[24] = "-", root[8] = "-1";
    column(oop, sizeof oop, 0);
    column(ip, sizeof ip, 1);
    if (g_row.median_us > 0) snprintf(med, sizeof med, "%.1f", g_row.median_us), snprintf(lib, sizeof lib, "%.1f", g_row.lib_us);
    if (g_row.k->rooted) snprintf(root, sizeof root, "%d", g_row.root);
    drv_print("  %-14s %12zu %12zu %6s %5s %5s   %s   %s   %9s %9s\n", g_row.k->name, g_row.bytes,
              g_row.k->blocked ? g_row.block : g_row.count, "float", g_row.k->redop, root, oop, ip, med, lib);
    memset(&g_row, 0, sizeof g_row);
}

static void lab1_after_case(const drv_case *c) {
    const lab1_case *s = c->state;
    if (g_row.open && (g_row.k != s->k || g_row.count != s->x.count || g_row.root != s->x.root)) flush_row();
    if (!g_row.open) {
        g_row.k = s->k, g_row.count = s->x.count, g_row.block = s->x.block, g_row.root = s->x.root;
        g_row.bytes = s->bytes, g_row.open = true;
    }
    g_row.wrong[s->in_place] = s->wrong;
    g_row.batch_us[s->in_place] = s->batch_us;
    if (!s->in_place) g_row.median_us = s->median_us, g_row.lib_us = s->lib_us;
}

static void lab1_finish(void) {
    flush_row();
    drv_print("# Out of bounds values : 0 OK\n");
    drv_print("# Avg bus bandwidth    : %g\n", g_busbw_n ? g_busbw_sum / g_busbw_n : 0.0);
}

static void plan_all(const drv_test *t, drv_plan *p);
static const drv_test TESTS[] = {
    {.name = "collectives", .plan = plan_all, .setup = lab1_setup, .run = lab1_run, .check = lab1_check,
     .model = lab1_model, .perf = lab1_perf, .teardown = lab1_teardown},
    {NULL},
};

static void plan_all(const drv_test *t, drv_plan *p) {
    size_t sizes[128], n = drv_sizes(sizes, 128);
    for (size_t k = 0; k < NCOLLS; k++) {
        const coll *co = &COLLS[k];
        if (g_only && strcmp(g_only, co->name)) continue;
        for (size_t i = 0; i < n; i++)
            for (int root = 0; root < (co->rooted ? g_n : 1); root++) {
                bool every = sizes[i] * 4 <= (size_t)g_all_roots_max;
                if (co->rooted && !every && root != 0 && root != g_n - 1) continue;
                for (int ip = 0; ip < 2; ip++) {
                    drv_instance *in = co->rooted
                        ? drv_plan_add(p, t, "%s.%s.r%d.c%zu", co->name, ip ? "ip" : "oop", root, sizes[i])
                        : drv_plan_add(p, t, "%s.%s.c%zu", co->name, ip ? "ip" : "oop", sizes[i]);
                    snprintf(in->group, sizeof in->group, "%s", co->name);
                    in->arg[0] = (int64_t)k, in->arg[1] = (int64_t)sizes[i], in->arg[2] = root, in->arg[3] = ip;
                }
            }
    }
}

static void lab1_init(void) {
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    g_seeds = calloc((size_t)g_n, sizeof *g_seeds);
    PL_CHECK(g_seeds != NULL, "out of host memory");
    if (g_only) {
        size_t i = 0;
        while (i < NCOLLS && strcmp(COLLS[i].name, g_only) != 0) i++;
        if (i == NCOLLS) pl_usage_error("--collective: unknown collective '%s'", g_only);
    }
    drv_print("# lab01: %d rank(s), device %s, comm %s, sizes %zu..%zu bytes; time = nccl-tests' (back to back,"
              " mean over ranks), med = median of the slowest rank (the grading basis)\n", g_n,
              pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm), drv_opts()->min_bytes,
              drv_opts()->max_bytes);
    drv_print("# %-14s %12s %12s %6s %5s %5s   %-33s   %-33s\n", "", "", "", "", "", "", "out-of-place", "in-place");
    drv_print("# %-14s %12s %12s %6s %5s %5s   %9s %8s %8s %6s   %9s %8s %8s %6s   %9s %9s\n", "collective", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
              "med", "lib med");
    drv_print("# %-14s %12s %12s %6s %5s %5s   %9s %8s %8s %6s   %9s %8s %8s %6s   %9s %9s\n", "", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)");
}

static const drv_flag FLAGS[] = {
    {"--collective", DRV_STR, &g_only, 0, 0, "run only this collective (broadcast, reduce, allgather, ...)"},
    {"--all-roots-max", DRV_INT, &g_all_roots_max, 0, 1 << 30,
     "test every root up to this many bytes, roots 0 and n-1 above (default 1M)"},
    {NULL},
};

static const drv_lab LAB = {
    .name = "01-collectives",
    .title = "Lab 1: collectives from point-to-point send/recv",
    .flags = FLAGS,
    .tests = TESTS,
    .init = lab1_init,
    .finish = lab1_finish,
    .after_case = lab1_after_case,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
