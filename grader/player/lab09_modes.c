/* lab09_modes.c (player) - Lab 9's modes, the student's program run alone (no referee):
 *
 *   RUN=route  a router learns from the load-balancing loss alone: tokens per expert and the
 *              aux loss at every step, from a random router (uniform) and from one that
 *              sends every token to expert 0 (skewed); scripts/plot-lab9-route.sh draws them.
 *   RUN=bench  (make bench LAB=9) the layer's forward + backward with each dispatcher by
 *              tokens per rank; the small all-reduce (one-shot, two-shot), a ring from
 *              send/recv (Lab 1's algorithm) and the library's, 1 KiB to 16 MiB, measured
 *              here and predicted on a profile (dgx-h100), with the crossovers.
 * Both run the lab's functions (the student's, or the solution with SOLUTION=1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab09.h"
#include "moe.h"          // defines: the lab API
#include "pl_costmodel.h" // defines: plc_profile, plc_put_time, plc_kernel_time, plc_coll_time

/* fn timed by the harness: -w/-n win; statistics of the slowest rank. */
static pl_timing time_it(void (*fn)(void *), void *arg, int warmup, int iters) {
    const drv_options *o = drv_opts();
    return pl_time(fn, arg, o->warmup >= 0 ? o->warmup : warmup, o->iters > 0 ? o->iters : iters, pl_comm_world());
}

static float frand(uint64_t seed, uint64_t id, uint64_t i, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(pl_rng_bits(seed, id, i) >> 11) / 9007199254740992.0);
}

/* ======================================================================================= */
/* RUN=route                                                                               */
/* ======================================================================================= */

static void route_run(const char *variant, int steps, float lr) {
    int n = pl_world(), T = 64, H = 16, F = 16, E = 4 * n, k = 2, Le = E / n;
    moe_config c = {T, H, F, E, k, 1.25f, 0.01f, pl_comm_world()};
    if (moe_config_check(&c) != MOE_OK) pl_usage_error("route: the configuration does not pass moe_config_check");
    size_t TH = (size_t)T * H, EH = (size_t)E * H, FH = (size_t)Le * F * H;
    float *h = malloc((EH > TH ? EH : TH) * sizeof *h), *wr = malloc(EH * sizeof *wr), *gr = malloc(EH * sizeof *gr);
    moe_routing r = {malloc((size_t)T * E * 4), malloc((size_t)T * k * 4), malloc((size_t)T * k * 4), malloc((size_t)T * k * 4), 0};
    PL_CHECK(h && wr && gr && r.probs && r.expert && r.gate && r.keep, "out of host memory");
    bool skew = !strcmp(variant, "skewed");
    for (size_t i = 0; i < EH; i++) wr[i] = frand(7, 1, i, -0.5f, 0.5f);
    if (skew)
        for (int e = 0; e < E; e++) wr[(size_t)e * H] = e == 0 ? 4.0f : 0.0f; /* x[:, 0] = 1: every token to expert 0 */
    moe_weights w = {pl_malloc_floats(EH), pl_malloc_floats(FH), pl_malloc_floats(FH), pl_malloc_floats(FH)};
    moe_weights g = {pl_malloc_floats(EH), pl_malloc_floats(FH), pl_malloc_floats(FH), pl_malloc_floats(FH)};
    float *tmp = malloc(FH * sizeof *tmp);
    PL_CHECK(tmp != NULL, "out of host memory");
    for (size_t i = 0; i < FH; i++) tmp[i] = frand(7, 2 + (uint64_t)pl_rank(), i, -0.2f, 0.2f);
    pl_upload(w.w_gate, tmp, FH * 4), pl_upload(w.w_up, tmp, FH * 4), pl_upload(w.w_down, tmp, FH * 4);
    free(tmp);
    float *x = pl_malloc_floats(TH), *y = pl_malloc_floats(TH), *dy = pl_malloc_floats(TH), *dx = pl_malloc_floats(TH);
    pl_fill(dy, 0.0f, TH, NULL); /* the loss is the aux loss alone: only it moves the router */
    moe_state *st = moe_state_create(&c, MOE_TWO_SIDED);
    double *counts = calloc((size_t)E + 2, sizeof *counts);
    for (int step = 0; step <= steps; step++) {
        for (size_t i = 0; i < TH; i++) h[i] = frand(9, 100 + (uint64_t)step, (uint64_t)pl_rank() * TH + i, -1, 1);
        for (int t = 0; t < T; t++) h[(size_t)t * H] = 1.0f;
        pl_upload(x, h, TH * 4);
        pl_upload(w.router, wr, EH * 4);
        moe_forward(&c, &w, st, x, y, &r, NULL);
        memset(counts, 0, ((size_t)E + 2) * sizeof *counts);
        for (int a = 0; a < T * k; a++) counts[r.expert[a]] += 1, counts[E] += !r.keep[a];
        counts[E + 1] = r.aux;
        pl_host_allreduce(counts, E + 2, PL_HOST_SUM, NULL);
        char line[1024];
        int len = snprintf(line, sizeof line, "route %s step %d aux %.6f dropped %.4f tokens", variant, step,
                           counts[E + 1] / n, counts[E] / ((double)n * T * k));
        for (int e = 0; e < E && len < (int)sizeof line - 16; e++) len += snprintf(line + len, sizeof line - (size_t)len, " %.0f", counts[e]);
        drv_say("%s\n", line);
        if (step == steps) break;
        pl_memset(g.router, 0, EH * 4, NULL), pl_memset(g.w_gate, 0, FH * 4, NULL);
        pl_memset(g.w_up, 0, FH * 4, NULL), pl_memset(g.w_down, 0, FH * 4, NULL);
        moe_backward(&c, &w, &g, st, dy, 1.0f, dx, NULL);
        /* the router is replicated: its gradient is summed over the ranks (data parallelism) */
        pl_download(gr, g.router, EH * 4);
        double *sum = malloc(EH * sizeof *sum);
        for (size_t i = 0; i < EH; i++) sum[i] = gr[i];
        pl_host_allreduce(sum, (int)EH, PL_HOST_SUM, NULL);
        for (size_t i = 0; i < EH; i++) wr[i] -= lr * (float)sum[i];
        free(sum);
    }
    moe_state_free(st);
    float *d[] = {w.router, w.w_gate, w.w_up, w.w_down, g.router, g.w_gate, g.w_up, g.w_down, x, y, dy, dx};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) pl_free(d[i]);
    free(h), free(wr), free(gr), free(counts);
    free(r.probs), free(r.expert), free(r.gate), free(r.keep);
}

int lab9_mode_route(void) {
    drv_say("# lab09 route: %d rank(s), 64 tokens each, E = %d experts, top-2, capacity factor 1.25, aux_alpha 0.01; "
            "the loss is the aux loss alone, SGD on the router (lr 40) with its gradient summed over the ranks\n",
            pl_world(), 4 * pl_world());
    drv_say("# columns: step, aux loss (mean over ranks), share of assignments dropped, tokens per expert (choices)\n");
    route_run("uniform", 30, 40.0f);
    route_run("skewed", 30, 40.0f);
    return 0;
}

/* ======================================================================================= */
/* RUN=bench                                                                               */
/* ======================================================================================= */

typedef struct {
    const moe_config *c;
    const moe_weights *w;
    moe_weights *g;
    moe_state *st;
    float *x, *y, *dy, *dx;
    moe_routing *r;
} layer_call;
static void run_layer(void *arg) {
    layer_call *l = arg;
    moe_forward(l->c, l->w, l->st, l->x, l->y, l->r, NULL);
    moe_backward(l->c, l->w, l->g, l->st, l->dy, 1.0f, l->dx, NULL);
}

static void bench_layer(int T) {
    int n = pl_world(), H = 256, F = 16, E = 2 * n, k = 2, Le = E / n;
    moe_config c = {T, H, F, E, k, 2.0f, 0.01f, pl_comm_world()};
    size_t TH = (size_t)T * H, EH = (size_t)E * H, FH = (size_t)Le * F * H;
    float *h = malloc((TH > EH ? TH : EH) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    moe_weights w = {pl_malloc_floats(EH), pl_malloc_floats(FH), pl_malloc_floats(FH), pl_malloc_floats(FH)};
    moe_weights g = {pl_malloc_floats(EH), pl_malloc_floats(FH), pl_malloc_floats(FH), pl_malloc_floats(FH)};
    for (size_t i = 0; i < EH; i++) h[i] = frand(3, 1, i, -0.1f, 0.1f);
    pl_upload(w.router, h, EH * 4);
    pl_fill(w.w_gate, 0.01f, FH, NULL), pl_fill(w.w_up, 0.01f, FH, NULL), pl_fill(w.w_down, 0.01f, FH, NULL);
    pl_memset(g.router, 0, EH * 4, NULL), pl_memset(g.w_gate, 0, FH * 4, NULL);
    pl_memset(g.w_up, 0, FH * 4, NULL), pl_memset(g.w_down, 0, FH * 4, NULL);
    float *x = pl_malloc_floats(TH), *y = pl_malloc_floats(TH), *dy = pl_malloc_floats(TH), *dx = pl_malloc_floats(TH);
    for (size_t i = 0; i < TH; i++) h[i] = frand(3, 2 + (uint64_t)pl_rank(), i, -1, 1);
    pl_upload(x, h, TH * 4), pl_upload(dy, h, TH * 4);
    moe_routing r = {malloc((size_t)T * E * 4), malloc((size_t)T * k * 4), malloc((size_t)T * k * 4), malloc((size_t)T * k * 4), 0};
    double t[2], moved = 0;
    for (int d = 0; d < 2; d++) {
        moe_state *st = moe_state_create(&c, (moe_dispatcher)d);
        layer_call lc = {&c, &w, &g, st, x, y, dy, dx, &r};
        t[d] = time_it(run_layer, &lc, 2, T >= 2048 ? 5 : 10).median_us;
        if (d == 0) { /* rows this rank sends away, both ways, forward and backward */
            for (int a = 0; a < T * k; a++) moved += r.keep[a] && r.expert[a] / Le != pl_rank();
            moved = drv_max(moved * 4.0 * 4.0 * H); /* x2 directions x2 passes, H floats */
        }
        moe_state_free(st);
    }
    drv_say("  layer %6d %10.1f %10.1f %7.2f %10.3f %10.3f\n", T, t[0], t[1], t[0] / t[1], moved / t[0] / 1e3, moved / t[1] / 1e3);
    float *dd[] = {w.router, w.w_gate, w.w_up, w.w_down, g.router, g.w_gate, g.w_up, g.w_down, x, y, dy, dx};
    for (size_t i = 0; i < sizeof dd / sizeof dd[0]; i++) pl_free(dd[i]);
    free(h), free(r.probs), free(r.expert), free(r.gate), free(r.keep);
}

/* Lab 1's ring all-reduce from send/recv (reduce-scatter, then all-gather), for the table. */
typedef struct {
    float *in, *out, *tmp;
    size_t count;
    moe_ar *ar;
    int which; /* 0 one-shot, 1 two-shot, 2 ring, 3 library */
} ar_call;

static void ring_allreduce(const float *in, float *out, float *tmp, size_t count) {
    int n = pl_world(), me = pl_rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
    pl_copy(out, in, count * 4, NULL);
    if (n == 1) return;
    size_t base = count / (size_t)n, extra = count % (size_t)n;
#define CH_LO(c) ((size_t)(c) * base + ((size_t)(c) < extra ? (size_t)(c) : extra))
#define CH_N(c) (base + ((size_t)(c) < extra))
    for (int s = 0; s < n - 1; s++) {
        int sc = (me - s + n) % n, rc = (me - s - 1 + n) % n;
        pl_group_start();
        pl_send(out + CH_LO(sc), CH_N(sc), next, pl_comm_world(), NULL);
        pl_recv(tmp, CH_N(rc), prev, pl_comm_world(), NULL);
        pl_group_end();
        pl_reduce_local(out + CH_LO(rc), tmp, CH_N(rc), PL_SUM, NULL);
    }
    for (int s = 0; s < n - 1; s++) {
        int sc = (me + 1 - s + n) % n, rc = (me - s + n) % n;
        pl_group_start();
        pl_send(out + CH_LO(sc), CH_N(sc), next, pl_comm_world(), NULL);
        pl_recv(out + CH_LO(rc), CH_N(rc), prev, pl_comm_world(), NULL);
        pl_group_end();
    }
#undef CH_LO
#undef CH_N
}

static void run_ar(void *arg) {
    ar_call *a = arg;
    switch (a->which) {
    case 0: moe_allreduce_oneshot(a->ar, a->in, a->out, a->count, NULL); break;
    case 1: moe_allreduce_twoshot(a->ar, a->in, a->out, a->count, NULL); break;
    case 2: ring_allreduce(a->in, a->out, a->tmp, a->count); break;
    default: pl_allreduce(a->in, a->out, a->count, PL_SUM, pl_comm_world(), NULL);
    }
}

/* The cost model's view (docs/cost-model.md, "Symmetric memory"), in seconds, of an
 * all-reduce of S bytes over n ranks of one node, each symmetric one as the single fused
 * kernel PyTorch and NVSHMEM run (one launch, barriers by signals between the GPUs):
 *   one-shot  launch + 2 put_alpha + max((n-1) S / put_beta, (n+1) S / mem_bw)
 *   two-shot  launch + 3 put_alpha + max(2 (n-1)/n S / put_beta, (2 + 2/n) S / mem_bw)
 *   ring      2(n-1) (intra_alpha + S/n / intra_beta) + (n-1) reduction kernels (Lab 1's,
 *             from send/recv)
 *   library   the profile's all-reduce (plc_coll_time) + launch */
static void predict_ar(const plc_profile *p, int n, double S, double out[4]) {
    double a = p->put_alpha, b = p->put_beta, m = p->mem_bw;
    out[0] = p->launch + 2 * a + fmax((n - 1) * S / b, (n + 1) * S / m);
    out[1] = p->launch + 3 * a + fmax(2.0 * (n - 1) / n * S / b, (2.0 + 2.0 / n) * S / m);
    out[2] = 2 * (n - 1) * plc_p2p_time(p, 1, S / n) + (n - 1) * plc_kernel_time(p, S / n / 4, 3 * S / n);
    out[3] = plc_coll_time(p, PL_OP_ALLREDUCE, n, 1, S) + p->launch;
}

/* The smallest size from which on (every larger size too) two-shot beats one-shot, and the
 * library beats both: a single noisy row does not make a crossover. */
static void crossovers(const size_t *bytes, double (*t)[4], int rows, const char *where) {
    int two = rows, lib = rows;
    while (two > 0 && t[two - 1][1] < t[two - 1][0]) two--;
    while (lib > 0 && t[lib - 1][3] < fmin(t[lib - 1][0], t[lib - 1][1])) lib--;
    char a[64] = "nowhere in this range", b[64] = "nowhere in this range";
    if (two < rows) snprintf(a, sizeof a, "from %zu B on", bytes[two]);
    if (lib < rows) snprintf(b, sizeof b, "from %zu B on", bytes[lib]);
    drv_say("  crossover %s: two-shot beats one-shot %s; the library beats both %s\n", where, a, b);
}

int lab9_mode_bench(void) {
    int n = pl_world();
    drv_say("# lab09 bench: %d rank(s), device %s, symmetric memory %s\n", n, pl_device_name(pl_info()->device), pl_sym_impl());
    drv_say("# layer forward + backward (H 256, E %d, top-2, F 16 so that moving rows dominates), median of the slowest rank\n", 2 * n);
    drv_say("# %-5s %6s %10s %10s %7s %10s %10s\n", "", "tokens", "two-sided", "one-sided", "ratio", "GB/s two", "GB/s one");
    drv_say("# %-5s %6s %10s %10s %7s %10s %10s\n", "", "/rank", "(us)", "(us)", "2s/1s", "(rows)", "(rows)");
    static const int tokens[] = {64, 256, 1024, 4096};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) bench_layer(tokens[i]);
    if (pl_info()->device == PL_DEVICE_CUDA)
        drv_say("# published, for comparison: DeepEP normal kernels, intranode EP8 on H800 NVLink: dispatch 153 GB/s, combine 158 GB/s\n");

    if (pl_info()->nodes > 1) {
        drv_say("# all-reduce latency: not measured: the ranks are on %d hosts, and the one-shot and two-shot read their "
                "peers' buffers through pl_sym_peer_ptr, which needs one node\n", pl_info()->nodes);
        return 0;
    }

    /* the all-reduce latency table */
    enum { ROWS = 8 };
    size_t bytes[ROWS];
    double meas[ROWS][4], pred[ROWS][4];
    for (int i = 0; i < ROWS; i++) bytes[i] = (size_t)1024 << (2 * i); /* 1 KiB .. 16 MiB */
    size_t maxc = bytes[ROWS - 1] / 4;
    float *in = pl_malloc_floats(maxc), *out = pl_malloc_floats(maxc), *tmp = pl_malloc_floats(maxc / (size_t)n + 1);
    pl_fill(in, 1.0f, maxc, NULL);
    moe_ar *ar = moe_ar_create(maxc, pl_comm_world());
    plc_profile prof;
    char err[256];
    bool have_prof = plc_profile_load(&prof, L9.profile, err, sizeof err) == 0;
    drv_say("# all-reduce latency (us), median of the slowest rank; predicted on %s at the same %d ranks, the symmetric ones "
            "as fused kernels%s\n", L9.profile, n, have_prof ? "" : " (profile not found)");
    drv_say("# %12s %10s %10s %10s %10s   %10s %10s %10s %10s\n", "bytes", "one-shot", "two-shot", "ring", "library",
            "pred 1-sh", "pred 2-sh", "pred ring", "pred lib");
    for (int i = 0; i < ROWS; i++) {
        size_t count = bytes[i] / 4;
        for (int wch = 0; wch < 4; wch++) {
            ar_call a = {in, out, tmp, count, ar, wch};
            meas[i][wch] = time_it(run_ar, &a, 2, drv_iters_for(bytes[i])).median_us;
        }
        if (have_prof) predict_ar(&prof, n, (double)bytes[i], pred[i]);
        for (int wch = 0; wch < 4 && have_prof; wch++) pred[i][wch] *= 1e6;
        drv_say("  %12zu %10.1f %10.1f %10.1f %10.1f   %10.2f %10.2f %10.2f %10.2f\n", bytes[i], meas[i][0], meas[i][1],
                meas[i][2], meas[i][3], have_prof ? pred[i][0] : NAN, have_prof ? pred[i][1] : NAN,
                have_prof ? pred[i][2] : NAN, have_prof ? pred[i][3] : NAN);
    }
    crossovers(bytes, meas, ROWS, "measured here");
    if (have_prof) {
        crossovers(bytes, pred, ROWS, "predicted");
        double p8[ROWS][4];
        for (int i = 0; i < ROWS; i++) predict_ar(&prof, 8, (double)bytes[i], p8[i]);
        crossovers(bytes, p8, ROWS, "predicted at 8 ranks");
    }
    moe_ar_free(ar);
    pl_free(in), pl_free(out), pl_free(tmp);
    return 0;
}
