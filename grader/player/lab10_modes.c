/* lab10_modes.c (player) - Lab 10's mode, the student's program run alone (no referee):
 *
 *   RUN=bench  (make bench LAB=10) causal attention over a sequence split across the ranks:
 *              ring (contiguous), ring (zig-zag) and Ulysses, forward, by tokens per rank,
 *              measured here and predicted on a profile (dgx-h100) by replaying each call's
 *              trace; then the profile's prediction at long contexts (1K to 1M tokens, a
 *              Llama-3-8B-like attention) from the lab's formulas (docs/cost-model.md,
 *              "Context parallelism"), with the crossover between the ring and Ulysses.
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
