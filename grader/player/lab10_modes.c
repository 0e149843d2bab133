/* lab10_modes.c (player) - Lab 10's modes, the student's program run alone (no referee):
 *
 *   RUN=bench  (make bench LAB=10) causal attention over a sequence split across the ranks:
 *              ring (contiguous), ring (zig-zag) and Ulysses, forward, by tokens per rank,
 *              measured here and predicted on a profile (dgx-h100) by replaying each call's
 *              trace; then the profile's prediction at long contexts (1K to 1M tokens, a
 *              Llama-3-8B-like attention) from the lab's formulas (docs/cost-model.md,
 *              "Context parallelism"), with the crossover between the ring and Ulysses.
 *   RUN=long   the peak memory per rank of a forward and a backward (ring, Ulysses),
 *              measured against the reference design's formula, and the longest sequence
 *              each fits in 80 GB per GPU on 1 to 8 GPUs.
 *   RUN=dump   every tensor of a small causal zig-zag case, for tests/lab10/check_reference.py.
 * It runs the lab's functions (the student's, or the solution with SOLUTION=1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"      // defines: the lab API
#include "kern_flash.h"   // defines: kern_flash_block_cost
#include "lab10.h"
#include "pl_costmodel.h" // defines: plc_profile, plc_replay_trace, plc_kernel_time, plc_p2p_time, plc_coll_time
#include "pl_internal.h"  // defines: pl_mem_reset_peak

typedef struct {
    cp_config c;
    int ulysses;
    float *q, *k, *v, *o, *lse;
} bench_call;

static void bench_run(void *arg) {
    bench_call *b = arg;
    if (b->ulysses) cp_ulysses_forward(&b->c, b->q, b->k, b->v, b->o, pl_stream_comm());
    else cp_ring_forward(&b->c, b->q, b->k, b->v, b->o, b->lse, pl_stream_comm());
    pl_stream_sync(pl_stream_comm());
}

static float *filled(size_t n, uint64_t id) {
    float *h = malloc(n * sizeof *h + 4), *d = pl_malloc_floats(n);
    for (size_t i = 0; i < n; i++) h[i] = (float)((double)(pl_rng_bits(77, id, i) >> 11) / 9007199254740992.0 * 2 - 1);
    pl_upload(d, h, n * sizeof *h);
    free(h);
    return d;
}

/* Measured median (us, slowest rank) and the profile's replay of one call (us, -1 none). */
static void measure(bench_call *b, const plc_profile *prof, double *meas, double *pred) {
    const drv_options *o = drv_opts();
    pl_timing t = pl_time(bench_run, b, o->warmup >= 0 ? o->warmup : 1, o->iters > 0 ? o->iters : 5, pl_comm_world());
    *meas = t.median_us;
    *pred = -1;
    if (!prof) return;
    pl_device_sync();
    pl_barrier(pl_comm_world());
    size_t first = pl_trace_count();
    bench_run(b);
    plc_prediction pp;
    char err[200];
    if (plc_replay_trace(prof, first, pl_comm_world(), &pp, err, sizeof err) == 0) *pred = pp.step_time * 1e6;
}

/* ---- the formulas (docs/cost-model.md, "Context parallelism"), forward, causal ------------ */

/* Ring, zig-zag: a step computes half a block (the diagonal one, step 0, its causal half
 * too) while the next block's K and V (fp32) travel; step t + 1 starts when both are done. */
static double ring_time(const plc_profile *p, double S, int n, int H, int Hkv, int d) {
    double Sl = S / n, by, fl;
    kern_flash_block_cost((int)Sl, (int)(Sl / 2), H, Hkv, d, &by, &fl);
    double compute = plc_kernel_time(p, fl, by);
    double comm = n > 1 ? plc_p2p_time(p, n <= p->gpus_per_node, 2.0 * Sl * Hkv * d * 4) : 0;
    double t = 0;
    for (int s = 0; s < n - 1; s++) t += fmax(compute, comm);
    return t + compute;
}

/* Ulysses: three all-to-alls in (q, k, v), the causal half of the whole sequence's
 * attention on H/n heads, one all-to-all out (o); nothing overlaps. */
static double ulysses_time(const plc_profile *p, double S, int n, int H, int Hkv, int d) {
    double by, fl, nodes = ceil((double)n / p->gpus_per_node);
    kern_flash_block_cost((int)S, (int)(S / 2), H / n, Hkv / n, d, &by, &fl);
    double a2a = 0;
    if (n > 1) {
        double per = S / n * d * 4; /* bytes per head of this rank's tokens */
        a2a = plc_coll_time(p, PL_OP_ALLTOALL, n, (int)nodes, per * H) + 2 * plc_coll_time(p, PL_OP_ALLTOALL, n, (int)nodes, per * Hkv) +
              plc_coll_time(p, PL_OP_ALLTOALL, n, (int)nodes, per * H);
    }
    return a2a + plc_kernel_time(p, fl, by);
}

int lab10_mode_bench(void) {
    int n = pl_world(), H = 2 * n, Hkv = 2 * n, d = 32;
    plc_profile prof;
    char err[200] = "";
    bool have = plc_profile_load(&prof, L10.profile, err, sizeof err) == 0;
    drv_say("# lab10 bench: %d rank(s), device %s; causal attention forward, H %d, Hkv %d, d %d, median of the slowest "
            "rank; predicted: the trace of one call replayed on %s%s\n", n, pl_device_name(pl_info()->device), H, Hkv, d,
            L10.profile, have ? "" : " (profile not found)");
    drv_say("# %8s %8s   %10s %10s %10s   %10s %10s %10s\n", "tokens", "S", "ring", "zig-zag", "ulysses", "ring", "zig-zag",
            "ulysses");
    drv_say("# %8s %8s   %10s %10s %10s   %10s %10s %10s\n", "/rank", "", "(us)", "(us)", "(us)", "pred us", "pred us",
            "pred us");
    static const int SL[] = {32, 96, 256};
    for (size_t i = 0; i < sizeof SL / sizeof SL[0]; i++) {
        int S = SL[i] * n;
        double meas[3], pred[3];
        for (int mth = 0; mth < 3; mth++) {
            bench_call b = {.c = {S, H, Hkv, d, 1, mth == 1 ? CP_ZIGZAG : CP_CONTIGUOUS, pl_comm_world()}, .ulysses = mth == 2};
            if (cp_config_check(&b.c, b.ulysses) != CP_OK) {
                drv_say("# cp_config_check refuses S %d for %s: skipped\n", S, mth == 2 ? "Ulysses" : "the ring");
                meas[mth] = pred[mth] = -1;
                continue;
            }
            int *pos = malloc(((size_t)S / n + 3) * sizeof *pos), rows = cp_positions(&b.c, pl_rank(), pos);
            free(pos);
            if (rows < 1 || rows > S / n + 2) pl_usage_error("bench: cp_positions returned %d tokens", rows);
            size_t nq = (size_t)rows * H * d, nk = (size_t)rows * Hkv * d;
            b.q = filled(nq, 1), b.k = filled(nk, 2), b.v = filled(nk, 3);
            b.o = pl_malloc_floats(nq), b.lse = pl_malloc_floats((size_t)rows * H);
            measure(&b, have ? &prof : NULL, &meas[mth], &pred[mth]);
            pl_free(b.q), pl_free(b.k), pl_free(b.v), pl_free(b.o), pl_free(b.lse);
        }
        drv_say("  %8d %8d   %10.1f %10.1f %10.1f   %10.2f %10.2f %10.2f\n", SL[i], S, meas[0], meas[1], meas[2], pred[0],
                pred[1], pred[2]);
    }
    if (!have || n != 1) return 0;
    /* one rank prints the profile's long-context table for every world size of a node */
    int Hm = 32, Hkvm = 8, dm = 128;
    drv_say("# predicted on %s, forward, causal, H %d, Hkv %d, d %d, fp32 K/V; ring: zig-zag, each step's transfer under "
            "the next step's compute; Ulysses: four all-to-alls, no overlap (ms)\n", prof.name, Hm, Hkvm, dm);
    drv_say("# %9s %4s %10s %10s %8s  %s\n", "S", "n", "ring", "ulysses", "ratio", "faster");
    for (int nn = 2; nn <= prof.gpus_per_node && nn <= Hkvm; nn *= 2) {
        const char *first = NULL;
        double change = -1;
        for (double S = 1024; S <= 1048576; S *= 2) {
            double r = ring_time(&prof, S, nn, Hm, Hkvm, dm), u = ulysses_time(&prof, S, nn, Hm, Hkvm, dm);
            const char *w = r < u ? "ring" : "ulysses";
            if (!first) first = w;
            else if (change < 0 && strcmp(w, first) != 0) change = S;
            if (S == 1024 || S == 4096 || S == 16384 || S == 65536 || S == 262144 || S == 1048576)
                drv_say("  %9.0f %4d %10.3f %10.3f %8.3f  %s\n", S, nn, r * 1e3, u * 1e3, r / u, w);
        }
        if (change > 0) drv_say("crossover np=%d: %s faster up to S %.0f, %s from there\n", nn, first, change / 2,
                                strcmp(first, "ring") ? "ring" : "ulysses");
        else drv_say("crossover np=%d: none from 1K to 1M tokens, %s faster throughout\n", nn, first);
    }
    return 0;
}

/* ---- RUN=dump: every tensor of a small case, for an outside reference ------------------- */

/* One rank's tensors of the dump, in the order a line prints them (per token: q, k, v, dout,
 * then the ring's o, lse, dq, dk, dv, then Ulysses' o, dq, dk, dv). */
enum { D_Q, D_K, D_V, D_G, D_RO, D_RL, D_RDQ, D_RDK, D_RDV, D_UO, D_UDQ, D_UDK, D_UDV, D_COUNT };

static int dump_width(int which, int H, int Hkv, int d) {
    switch (which) {
    case D_K: case D_V: case D_RDK: case D_RDV: case D_UDK: case D_UDV: return Hkv * d;
    case D_RL: return H;
    default: return H * d;
    }
}

/* make lab-10 RUN=dump: causal, zig-zag, GQA; S = 6n + 5 tokens; rank 0 prints one line per
 * token ("tok POS" and the tensors above, %.9g), tokens in the sequence's order, after a
 * header line "dump S H Hkv d n". tests/lab10/check_reference.py reads it. */
int lab10_mode_dump(void) {
    int n = pl_world(), me = pl_rank(), H = 2 * n, Hkv = n, d = 8, S = 6 * n + 5;
    cp_config c = {S, H, Hkv, d, 1, CP_ZIGZAG, pl_comm_world()};
    if (cp_config_check(&c, 1) != CP_OK) pl_usage_error("dump: cp_config_check refuses the dump's configuration");
    int *rows = malloc((size_t)n * sizeof *rows), *pos = malloc(((size_t)S + 2 * n + 2) * sizeof *pos), *off = malloc((size_t)n * sizeof *off);
    int at = 0;
    for (int r = 0; r < n; r++) off[r] = at, rows[r] = cp_positions(&c, r, pos + at), at += rows[r];
    if (at != S) pl_usage_error("dump: cp_positions gives %d tokens in all, the sequence has %d", at, S);
    int Sl = rows[me], width = 0;
    for (int w = 0; w < D_COUNT; w++) width += dump_width(w, H, Hkv, d);
    float *t[D_COUNT];
    for (int w = 0; w < D_COUNT; w++) t[w] = pl_malloc_floats((size_t)Sl * dump_width(w, H, Hkv, d) + 1);
    /* inputs: a function of (tensor, position, element) only, so every layout holds the same sequence */
    for (int w = D_Q; w <= D_G; w++) {
        int wd = dump_width(w, H, Hkv, d);
        float *h = malloc((size_t)Sl * wd * sizeof *h + 4);
        for (int i = 0; i < Sl; i++)
            for (int e = 0; e < wd; e++)
                h[(size_t)i * wd + e] = (float)((double)(pl_rng_bits(1010, (uint64_t)w, (uint64_t)pos[off[me] + i] * 4096u + e) >> 11) /
                                                9007199254740992.0 * (w == D_Q ? 4 : 2) - (w == D_Q ? 2 : 1));
        pl_upload(t[w], h, (size_t)Sl * wd * sizeof *h);
        free(h);
    }
    pl_stream *s = pl_stream_comm();
    cp_ring_forward(&c, t[D_Q], t[D_K], t[D_V], t[D_RO], t[D_RL], s);
    cp_ring_backward(&c, t[D_Q], t[D_K], t[D_V], t[D_RO], t[D_RL], t[D_G], t[D_RDQ], t[D_RDK], t[D_RDV], s);
    cp_ulysses_forward(&c, t[D_Q], t[D_K], t[D_V], t[D_UO], s);
    cp_ulysses_backward(&c, t[D_Q], t[D_K], t[D_V], t[D_G], t[D_UDQ], t[D_UDK], t[D_UDV], s);
    pl_stream_sync(s);
    /* every rank's rows to rank 0, as one block [Sl, width] each */
    float *mine = malloc((size_t)Sl * width * sizeof *mine + 4);
    for (int w = 0, col = 0; w < D_COUNT; col += dump_width(w, H, Hkv, d), w++) {
        int wd = dump_width(w, H, Hkv, d);
        float *h = malloc((size_t)Sl * wd * sizeof *h + 4);
        pl_download(h, t[w], (size_t)Sl * wd * sizeof *h);
        for (int i = 0; i < Sl; i++) memcpy(mine + (size_t)i * width + col, h + (size_t)i * wd, (size_t)wd * sizeof *h);
        free(h);
    }
    float *dbuf = pl_malloc_floats((size_t)(S + 2) * width);
    if (me == 0) {
        pl_upload(dbuf, mine, (size_t)Sl * width * sizeof *mine);
        for (int r = 1; r < n; r++) pl_recv(dbuf + (size_t)off[r] * width, (size_t)rows[r] * width, r, c.comm, NULL);
        pl_stream_sync(pl_stream_compute());
        float *all = malloc((size_t)S * width * sizeof *all + 4);
        pl_download(all, dbuf, (size_t)S * width * sizeof *all);
        drv_say("dump S %d H %d Hkv %d d %d n %d\n", S, H, Hkv, d, n);
        for (int p = 0; p < S; p++) {
            int i = 0;
            while (i < S && pos[i] != p) i++;
            char line[16384];
            int len = snprintf(line, sizeof line, "tok %d", p);
            for (int e = 0; e < width && len < (int)sizeof line - 20; e++)
                len += snprintf(line + len, sizeof line - len, " %.9g", (double)all[(size_t)i * width + e]);
            drv_say("%s\n", line);
        }
        free(all);
    } else {
        pl_upload(dbuf, mine, (size_t)Sl * width * sizeof *mine);
        pl_send(dbuf, (size_t)Sl * width, 0, c.comm, NULL);
        pl_stream_sync(pl_stream_compute());
    }
    pl_free(dbuf);
    free(mine);
    for (int w = 0; w < D_COUNT; w++) pl_free(t[w]);
    free(rows), free(pos), free(off);
    return 0;
}

/* ---- RUN=long: memory per rank, measured and predicted ----------------------------------- */

/* Bytes per rank of the reference design (solutions/10-context) over a forward and a
 * backward with every input and output of both allocated (q, k, v, o, lse, dout, dq, dk,
 * dv) plus the larger of the two calls' scratch. method 0: ring (n = 1: one rank, the whole
 * sequence), 1: Ulysses. fp32, ints 4 bytes. */
static double design_bytes(int method, double S, int n, int H, int Hkv, int d) {
    double rows = ceil(S / n), maxrows = rows + 1;
    double io = rows * (4.0 * H + 4.0 * Hkv) * d + rows * H, fwd, bwd;
    if (method == 0) {
        fwd = (n > 1 ? 4.0 * maxrows * Hkv * d : 0) + rows * H * (d + 1) + S;
        bwd = (n > 1 ? 8.0 * maxrows * Hkv * d : 0) + S;
    } else {
        double common = rows * H * d + 2.0 * rows * n + S; /* the packing buffer, its orders, the positions */
        fwd = S * d * (2.0 * H + 2.0 * Hkv) / n + S * H / n + common;
        bwd = S * d * (4.0 * H + 4.0 * Hkv) / n + S * H / n + common;
    }
    return 4.0 * (io + (fwd > bwd ? fwd : bwd));
}

typedef struct {
    cp_config c;
    int method;
    float *t[10]; /* q k v o lse dout dq dk dv, and one spare */
} long_call;

/* the peak bytes in use (this rank) over one forward and one backward, inputs included */
static double long_peak(int method, int S, int H, int Hkv, int d) {
    int n = pl_world();
    long_call b = {.c = {S, H, Hkv, d, 1, CP_ZIGZAG, pl_comm_world()}, .method = method};
    if (cp_config_check(&b.c, method == 1) != CP_OK) return -1;
    int *pos = malloc(((size_t)S / n + 3) * sizeof *pos), rows = cp_positions(&b.c, pl_rank(), pos);
    free(pos);
    pl_device_sync();
    size_t base = pl_mem_in_use();
    pl_mem_reset_peak();
    size_t wq = (size_t)rows * H * d, wk = (size_t)rows * Hkv * d;
    size_t sizes[9] = {wq, wk, wk, wq, (size_t)rows * H, wq, wq, wk, wk};
    for (int i = 0; i < 9; i++) b.t[i] = filled(sizes[i], 10 + (uint64_t)i);
    pl_stream *s = pl_stream_comm();
    if (method == 0) {
        cp_ring_forward(&b.c, b.t[0], b.t[1], b.t[2], b.t[3], b.t[4], s);
        cp_ring_backward(&b.c, b.t[0], b.t[1], b.t[2], b.t[3], b.t[4], b.t[5], b.t[6], b.t[7], b.t[8], s);
    } else {
        cp_ulysses_forward(&b.c, b.t[0], b.t[1], b.t[2], b.t[3], s);
        cp_ulysses_backward(&b.c, b.t[0], b.t[1], b.t[2], b.t[5], b.t[6], b.t[7], b.t[8], s);
    }
    pl_device_sync();
    double peak = (double)(pl_mem_peak() - base);
    for (int i = 0; i < 9; i++) pl_free(b.t[i]);
    return drv_max(peak);
}

/* make lab-10 RUN=long: the peak memory per rank of a forward and a backward, measured here
 * against the reference design's formula, then the longest sequence each design fits in a
 * budget (80 GB) on 1 to 8 GPUs at a Llama-3-8B-like attention layer. */
int lab10_mode_long(void) {
    int n = pl_world(), H = 2 * n, Hkv = n, d = 16;
    drv_say("# lab10 long: %d rank(s); peak bytes per rank over one forward + backward (inputs, outputs, scratch), "
            "the largest rank; H %d, Hkv %d, d %d, causal zig-zag\n", n, H, Hkv, d);
    drv_say("# %8s %8s %12s %12s %7s %12s %12s %7s\n", "S", "tok/rank", "ring", "formula", "ratio", "ulysses", "formula",
            "ratio");
    static const int SL[] = {32, 128, 512};
    for (size_t i = 0; i < sizeof SL / sizeof SL[0]; i++) {
        int S = SL[i] * n;
        double r = long_peak(0, S, H, Hkv, d), u = long_peak(1, S, H, Hkv, d);
        double rf = design_bytes(0, S, n, H, Hkv, d), uf = design_bytes(1, S, n, H, Hkv, d);
        drv_say("  %8d %8d %12.0f %12.0f %7.3f %12.0f %12.0f %7.3f\n", S, SL[i], r, rf, r > 0 ? r / rf : 0, u, uf,
                u > 0 ? u / uf : 0);
    }
    if (n != 1) return 0;
    double budget = 80e9;
    int Hm = 32, Hkvm = 8, dm = 128;
    drv_say("# the longest sequence whose attention layer (forward + backward, one layer's q, k, v, o, their gradients "
            "and the scratch; no weights, no other layers) fits %.0f GB per GPU, H %d, Hkv %d, d %d, fp32, by the "
            "formulas above\n", budget / 1e9, Hm, Hkvm, dm);
    drv_say("# %4s %14s %14s\n", "n", "ring", "ulysses");
    for (int nn = 1; nn <= 8; nn *= 2) {
        double best[2] = {0, 0};
        for (int m = 0; m < 2; m++) {
            if (m == 1 && (Hm % nn || Hkvm % nn)) continue;
            double lo = 1, hi = 1e12;
            while (hi - lo > 1) { /* bytes grow with S: bisect */
                double mid = floor((lo + hi) / 2);
                if (design_bytes(m, mid, nn, Hm, Hkvm, dm) <= budget) lo = mid;
                else hi = mid;
            }
            best[m] = lo;
        }
        drv_say("  %4d %14.0f %14.0f\n", nn, best[0], best[1]);
        drv_say("long np=%d ring_tokens=%.0f ulysses_tokens=%.0f\n", nn, best[0], best[1]);
    }
    return 0;
}
