/* lab01.c - the driver of Lab 1 (collectives from send/recv).
 *
 * Like nccl-tests, each collective is a small table entry (buffer sizes, input, expected
 * output, the student's function, the library's, the traffic model and the bus-bandwidth
 * factor); the loop below does the sweep, the checks, the timing, the table and the
 * records for the grader once for all of them.
 *
 * Inputs are small integers stored as floats, so every summation order gives the same
 * bits: a result is right only if it is bit-identical to the expected one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "driver.h"

typedef void (*student_fn)(const float *, float *, size_t, pl_comm *, pl_stream *);
typedef void (*student_root_fn)(const float *, float *, size_t, int, pl_comm *, pl_stream *);

typedef enum { MODEL_RING_TOTAL, MODEL_PER_RANK, MODEL_LOG_STEPS } traffic_model;

typedef struct {
    const char *name;
    int rooted;
    traffic_model model;
    pl_op_kind lib_kind;
    student_fn run;
    student_root_fn run_root;
} coll;

static const coll COLLS[] = {
    {"broadcast", 1, MODEL_PER_RANK, PL_OP_BROADCAST, NULL, lab_broadcast},
    {"reduce", 1, MODEL_PER_RANK, PL_OP_REDUCE, NULL, lab_reduce},
    {"allgather", 0, MODEL_RING_TOTAL, PL_OP_ALLGATHER, lab_allgather, NULL},
    {"reduce_scatter", 0, MODEL_RING_TOTAL, PL_OP_REDUCE_SCATTER, lab_reduce_scatter, NULL},
    {"allreduce_ring", 0, MODEL_RING_TOTAL, PL_OP_ALLREDUCE, lab_allreduce_ring, NULL},
    {"allreduce_rd", 0, MODEL_LOG_STEPS, PL_OP_ALLREDUCE, lab_allreduce_rd, NULL},
    {"allreduce", 0, MODEL_RING_TOTAL, PL_OP_ALLREDUCE, lab_allreduce, NULL},
};
#define NCOLLS (sizeof COLLS / sizeof COLLS[0])

static int g_n, g_me;
static uint64_t g_seed;
static pl_comm *g_comm;

/* The value rank r holds at index i of its send buffer: an integer in [-4, 4]. */
static float input(int r, size_t i) {
    return (float)((int)((i * 31 + (size_t)r * 17 + g_seed) % 9) - 4);
}

/* Element counts of the send and receive buffers for a sweep size of `count` elements
 * (nccl-tests' S: the whole buffer; gather/scatter blocks are S/n per rank). */
static size_t block(const coll *c, size_t count) {
    return (c->lib_kind == PL_OP_ALLGATHER || c->lib_kind == PL_OP_REDUCE_SCATTER) ? count / (size_t)g_n : count;
}
static size_t send_count(const coll *c, size_t count) {
    return c->lib_kind == PL_OP_ALLGATHER ? block(c, count) : c->lib_kind == PL_OP_REDUCE_SCATTER ? block(c, count) * g_n : count;
}
static size_t recv_count(const coll *c, size_t count) {
    return c->lib_kind == PL_OP_ALLGATHER ? block(c, count) * g_n : c->lib_kind == PL_OP_REDUCE_SCATTER ? block(c, count) : count;
}

static float sum_over_ranks(size_t i) {
    float s = 0;
    for (int r = 0; r < g_n; r++) s += input(r, i);
    return s;
}

/* The expected receive buffer of this rank; returns false when it is not checked. */
static bool expected(const coll *c, size_t count, int root, float *out) {
    size_t n = recv_count(c, count), b = block(c, count);
    switch (c->lib_kind) {
    case PL_OP_BROADCAST: for (size_t i = 0; i < n; i++) out[i] = input(root, i); return true;
    case PL_OP_REDUCE:
        if (g_me != root) return false;
        for (size_t i = 0; i < n; i++) out[i] = sum_over_ranks(i);
        return true;
    case PL_OP_ALLGATHER:
        for (int r = 0; r < g_n; r++)
            for (size_t j = 0; j < b; j++) out[(size_t)r * b + j] = input(r, j);
        return true;
    case PL_OP_REDUCE_SCATTER:
        for (size_t j = 0; j < b; j++) out[j] = sum_over_ranks((size_t)g_me * b + j);
        return true;
    default: for (size_t i = 0; i < n; i++) out[i] = sum_over_ranks(i); return true;
    }
}

/* Buffers of one case. In-place layouts follow NCCL: all-gather sends from its own block
 * of the output, reduce-scatter receives into its own block of the input. */
typedef struct {
    float *base;       /* allocation holding the in-place buffer, or the receive buffer */
    float *send, *recv;
    float *send_alloc; /* separate send buffer when out of place */
    size_t nsend, nrecv;
} bufs;

static void setup(const coll *c, size_t count, int root, bool in_place, bufs *b, float *host) {
    memset(b, 0, sizeof *b);
    b->nsend = send_count(c, count);
    b->nrecv = recv_count(c, count);
    size_t blk = block(c, count);
    /* Every rank's send buffer holds its own values, so data from the wrong root shows. */
    for (size_t i = 0; i < b->nsend; i++) host[i] = input(g_me, i);
    if (!in_place) {
        b->send_alloc = pl_malloc_floats(b->nsend);
        b->base = pl_malloc_floats(b->nrecv);
        b->send = b->send_alloc;
        b->recv = b->base;
        pl_upload(b->send, host, b->nsend * sizeof(float));
        pl_poison(b->recv, b->nrecv, NULL);
        return;
    }
    size_t total = b->nsend > b->nrecv ? b->nsend : b->nrecv;
    b->base = pl_malloc_floats(total);
    pl_poison(b->base, total, NULL);
    switch (c->lib_kind) {
    case PL_OP_ALLGATHER:
        b->recv = b->base;
        b->send = b->base + (size_t)g_me * blk;
        pl_upload(b->send, host, blk * sizeof(float));
        break;
    case PL_OP_REDUCE_SCATTER:
        b->send = b->base;
        b->recv = b->base + (size_t)g_me * blk;
        pl_upload(b->send, host, b->nsend * sizeof(float));
        break;
    case PL_OP_BROADCAST:
        b->send = b->recv = b->base;
        if (g_me == root) pl_upload(b->base, host, b->nsend * sizeof(float));
        break;
    default:
        b->send = b->recv = b->base;
        pl_upload(b->base, host, b->nsend * sizeof(float));
    }
}

static void release(bufs *b) {
    pl_free(b->send_alloc);
    pl_free(b->base);
}

static void call_student(const coll *c, const bufs *b, size_t count, int root) {
    size_t arg = c->lib_kind == PL_OP_ALLGATHER || c->lib_kind == PL_OP_REDUCE_SCATTER ? block(c, count) : count;
    if (c->rooted) c->run_root(b->send, b->recv, arg, root, g_comm, NULL);
    else c->run(b->send, b->recv, arg, g_comm, NULL);
}

static void call_library(const coll *c, const bufs *b, size_t count, int root) {
    size_t blk = block(c, count);
    switch (c->lib_kind) {
    case PL_OP_BROADCAST: pl_broadcast(b->send, b->recv, count, root, g_comm, NULL); break;
    case PL_OP_REDUCE: pl_reduce(b->send, b->recv, count, PL_SUM, root, g_comm, NULL); break;
    case PL_OP_ALLGATHER: pl_allgather(b->send, b->recv, blk, g_comm, NULL); break;
    case PL_OP_REDUCE_SCATTER: pl_reduce_scatter(b->send, b->recv, blk, PL_SUM, g_comm, NULL); break;
    default: pl_allreduce(b->send, b->recv, count, PL_SUM, g_comm, NULL);
    }
}

typedef struct {
    const coll *c;
    const bufs *b;
    size_t count;
    int root, library;
} timed_call;

static void run_timed(void *arg) {
    timed_call *t = arg;
    if (t->library) call_library(t->c, t->b, t->count, t->root);
    else call_student(t->c, t->b, t->count, t->root);
}

static double busbw_factor(const coll *c) {
    if (c->lib_kind == PL_OP_ALLREDUCE) return 2.0 * (g_n - 1) / g_n;
    if (c->lib_kind == PL_OP_ALLGATHER || c->lib_kind == PL_OP_REDUCE_SCATTER) return (double)(g_n - 1) / g_n;
    return 1.0;
}

static int ceil_log2(int n) {
    int s = 0;
    while ((1 << s) < n) s++;
    return s;
}

static int g_iters_opt, g_warmup_opt;
static bool g_quiet;

/* Iterations: enough to be stable for small messages, few for large ones. */
static int iters_for(size_t bytes) {
    if (g_iters_opt > 0) return g_iters_opt;
    if (bytes >= (32u << 20)) return 2;
    if (bytes >= (4u << 20)) return 4;
    if (bytes >= (256u << 10)) return 10;
    return 20;
}

static void run_case(const coll *c, size_t count, int root, bool in_place, float *host_in,
                     float *host_exp, float *host_got, float *host_send) {
    char name[128];
    if (c->rooted) snprintf(name, sizeof name, "%s.%s.r%d.c%zu", c->name, in_place ? "ip" : "oop", root, count);
    else snprintf(name, sizeof name, "%s.%s.c%zu", c->name, in_place ? "ip" : "oop", count);
    if (!drv_case_begin(name)) return;

    bufs b;
    setup(c, count, root, in_place, &b, host_in);
    size_t S = recv_count(c, count) > send_count(c, count) ? recv_count(c, count) : send_count(c, count);
    size_t bytes = S * sizeof(float);

    /* One checked call, with the instrumentation counting only the student's work. */
    pl_device_sync();
    pl_metrics_reset();
    call_student(c, &b, count, root);
    pl_device_sync();
    pl_metrics m;
    pl_metrics_get(&m);

    bool checked = expected(c, count, root, host_exp);
    double wrong = 0, first_wrong = -1, exp_v = 0, got_v = 0;
    if (checked && b.nrecv) {
        pl_download(host_got, b.recv, b.nrecv * sizeof(float));
        pl_compare cmp = pl_compare_host(host_got, host_exp, b.nrecv, 0.0);
        wrong = (double)cmp.wrong;
        if (cmp.wrong) {
            first_wrong = (double)cmp.first_wrong;
            exp_v = cmp.expected;
            got_v = cmp.got;
        }
    }
    /* The send buffer is const: out of place, it must come back untouched. */
    double send_wrong = 0;
    if (!in_place && b.nsend) {
        pl_download(host_send, b.send, b.nsend * sizeof(float));
        pl_compare cmp = pl_compare_host(host_send, host_in, b.nsend, 0.0);
        send_wrong = (double)cmp.wrong;
    }
    double total_wrong = drv_sum(wrong), total_send_wrong = drv_sum(send_wrong);
    /* Report the first wrong element of the lowest rank that has one. */
    double bad_rank = drv_min(wrong > 0 ? g_me : 1e9);
    double w_index = drv_max(g_me == bad_rank ? first_wrong : -1);
    double w_exp = drv_max(g_me == bad_rank ? exp_v : -1e30);
    double w_got = g_me == bad_rank ? got_v : -1e30;
    w_got = drv_max(isnan(w_got) ? 1e31 : w_got);

    double lib_calls = drv_sum((double)m.coll_total);
    double sent_sum = drv_sum((double)m.bytes_sent), sent_max = drv_max((double)m.bytes_sent);
    double msgs_max = drv_max((double)m.msgs_sent);

    drv_result *r = drv_result_new(name, c->name);
    drv_result_num(r, "count", (double)count);
    drv_result_num(r, "bytes", (double)bytes);
    drv_result_num(r, "wrong", total_wrong);
    drv_result_num(r, "lib_calls", lib_calls);
    drv_result_num(r, "msgs_per_rank", msgs_max);

    /* Counted traffic against the optimum of REFERENCE.md. */
    double opt = 0, measured = 0;
    switch (c->model) {
    case MODEL_RING_TOTAL: {
        double factor = c->lib_kind == PL_OP_ALLREDUCE ? 2.0 * (g_n - 1) : (double)(g_n - 1);
        double moved = c->lib_kind == PL_OP_ALLREDUCE ? (double)bytes : (double)block(c, count) * sizeof(float) * g_n;
        opt = factor * moved / g_n; /* per rank, on average */
        measured = sent_sum / g_n;
        break;
    }
    case MODEL_PER_RANK: opt = g_n > 1 ? (double)bytes : 0; measured = sent_max; break;
    case MODEL_LOG_STEPS: opt = measured = 0; break;
    }
    bool small_allreduce = c->lib_kind == PL_OP_ALLREDUCE && c->model != MODEL_LOG_STEPS &&
                           !strcmp(c->name, "allreduce") && bytes < LAB_ALLREDUCE_SMALL_BYTES;
    if (c->model == MODEL_LOG_STEPS || small_allreduce) {
        /* Latency-optimal: ceil(log2 n) messages per rank (the fold adds one on a
         * non-power of two, which ceil already counts). */
        double mopt = count ? ceil_log2(g_n) : 0;
        drv_result_num(r, "msgs_optimal", mopt);
        if (msgs_max > 0) drv_result_num(r, "msgs_ratio", mopt / msgs_max);
        else drv_result_num(r, "msgs_ratio", 1.0);
    } else {
        drv_result_num(r, "bytes_per_rank", measured);
        drv_result_num(r, "bytes_optimal", opt);
        drv_result_num(r, "bytes_ratio", measured > 0 ? opt / measured : 1.0);
    }

    char msg[256] = "";
    const char *verdict = "pass";
    if (lib_calls > 0) {
        verdict = "forbidden";
        double kinds[PL_OP_COUNT];
        int which = -1;
        for (int k = 0; k < PL_OP_COUNT; k++) {
            kinds[k] = drv_sum((double)m.coll_calls[k]);
            if (which < 0 && kinds[k] > 0) which = k;
        }
        snprintf(msg, sizeof msg, "called the library collective pl_%s %.0f time(s): use pl_send/pl_recv only",
                 which >= 0 ? pl_op_kind_name((pl_op_kind)which) : "?", lib_calls);
    } else if (total_wrong > 0) {
        verdict = "wrong";
        drv_result_num(r, "first_wrong", w_index);
        drv_result_num(r, "expected", w_exp);
        if (w_got < 1e31) drv_result_num(r, "got", w_got); /* NaN: the poison, never written */
        drv_result_num(r, "rank", bad_rank);
        if (w_got >= 1e31)
            snprintf(msg, sizeof msg, "%.0f wrong element(s); first on rank %.0f at index %.0f: expected %g, got NaN (never written?)",
                     total_wrong, bad_rank, w_index, w_exp);
        else
            snprintf(msg, sizeof msg, "%.0f wrong element(s); first on rank %.0f at index %.0f: expected %g, got %g",
                     total_wrong, bad_rank, w_index, w_exp, w_got);
    } else if (total_send_wrong > 0) {
        verdict = "wrong";
        snprintf(msg, sizeof msg, "the send buffer was modified (%.0f element(s)); it is const", total_send_wrong);
    }

    /* Time correct out-of-place calls, and the library collective on the same buffers. */
    double t_us = 0, lib_us = 0;
    if (!strcmp(verdict, "pass") && !in_place && (!c->rooted || root == 0)) {
        int iters = iters_for(bytes), warm = g_warmup_opt >= 0 ? g_warmup_opt : 1;
        timed_call tc = {c, &b, count, root, 0};
        pl_timing ts = pl_time(run_timed, &tc, warm, iters, g_comm);
        tc.library = 1;
        pl_timing tl = pl_time(run_timed, &tc, warm, iters, g_comm);
        t_us = ts.median_us;
        lib_us = tl.median_us;
        double algbw = t_us > 0 ? bytes / t_us / 1e3 : 0, lib_algbw = lib_us > 0 ? bytes / lib_us / 1e3 : 0;
        drv_result_num(r, "time_us", t_us);
        drv_result_num(r, "lib_time_us", lib_us);
        drv_result_num(r, "algbw", algbw);
        drv_result_num(r, "busbw", algbw * busbw_factor(c));
        drv_result_num(r, "lib_busbw", lib_algbw * busbw_factor(c));
        /* One rank has nothing to communicate: no speed to compare. */
        if (t_us > 0 && g_n > 1) drv_result_num(r, "speed_ratio", lib_us / t_us);
    }
    if (!g_quiet) {
        char tcol[64] = "       -        -        -", lcol[48] = "       -        -";
        if (t_us > 0) {
            double algbw = bytes / t_us / 1e3;
            snprintf(tcol, sizeof tcol, "%8.1f %8.3f %8.3f", t_us, algbw, algbw * busbw_factor(c));
            snprintf(lcol, sizeof lcol, "%8.1f %8.3f", lib_us, bytes / lib_us / 1e3 * busbw_factor(c));
        }
        char rootcol[16] = "";
        if (c->rooted) snprintf(rootcol, sizeof rootcol, "r%d", root);
        drv_print("%-15s %4s %4s %12zu %11zu %s %7.0f  %s  %s\n", c->name, in_place ? "ip" : "oop",
                  rootcol, bytes, count, tcol, total_wrong, lcol, verdict);
    }
    drv_result_emit(r, verdict, msg[0] ? msg : NULL);
    release(&b);
}

int main(int argc, char **argv) {
    drv_opts o = {.min_bytes = 0, .max_bytes = 64u << 20, .factor = 2, .warmup = -1};
    const char *only = NULL;
    int all_roots_max = 1 << 20;
    drv_flag extra[] = {
        {"--collective", "run only this collective (broadcast, reduce, allgather, ...)", NULL, &only},
        {"--all-roots-max", "test every root up to this many bytes, roots 0 and n-1 above (default 1M)", &all_roots_max, NULL},
        {NULL, NULL, NULL, NULL}};
    drv_init(&argc, &argv, "lab01", "Lab 1: collectives from point-to-point send/recv", &o, extra);
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    g_seed = pl_info()->seed;
    g_iters_opt = o.iters;
    g_warmup_opt = o.warmup;
    g_quiet = o.quiet;
    if (only) {
        size_t i = 0;
        while (i < NCOLLS && strcmp(COLLS[i].name, only) != 0) i++;
        if (i == NCOLLS) pl_usage_error("--collective: unknown collective '%s'", only);
    }

    size_t sizes[128];
    size_t nsizes = drv_sizes(&o, sizes, 128);
    size_t maxc = sizes[nsizes - 1] + (size_t)g_n; /* room for any layout */
    float *h_in = malloc(maxc * sizeof(float)), *h_exp = malloc(maxc * sizeof(float));
    float *h_got = malloc(maxc * sizeof(float)), *h_send = malloc(maxc * sizeof(float));
    PL_CHECK(h_in && h_exp && h_got && h_send, "out of host memory for the check buffers");

    drv_print("# lab01: %d rank(s), device %s, comm %s, sizes %zu..%zu bytes\n", g_n,
              pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm), o.min_bytes, o.max_bytes);
    drv_print("# %-13s %4s %4s %12s %11s %8s %8s %8s %7s  %8s %8s  %s\n", "collective", "", "", "size(B)",
              "count", "time(us)", "algbw", "busbw", "#wrong", "lib(us)", "lib bus", "verdict");
    for (size_t s = 0; s < nsizes; s++) {
        for (size_t k = 0; k < NCOLLS; k++) {
            const coll *c = &COLLS[k];
            if (only && strcmp(only, c->name) != 0) continue;
            for (int ip = 0; ip < 2; ip++) {
                if (!c->rooted) {
                    run_case(c, sizes[s], 0, ip, h_in, h_exp, h_got, h_send);
                    continue;
                }
                for (int root = 0; root < g_n; root++) {
                    bool every = sizes[s] * 4 <= (size_t)all_roots_max;
                    if (!every && root != 0 && root != g_n - 1) continue;
                    run_case(c, sizes[s], root, ip, h_in, h_exp, h_got, h_send);
                }
            }
        }
    }
    free(h_in);
    free(h_exp);
    free(h_got);
    free(h_send);
    int failed = drv_cases_failed(), run = drv_cases_run();
    drv_print("# %d case(s), %d failed\n", run, failed);
    return drv_finish();
}
