/* lab10_modes.c (player) - Lab 10's modes, the student's program run alone (no referee):
 *
 *   RUN=bench  (make bench LAB=10) causal attention over a sequence split across the ranks:
 *              ring (contiguous), ring (zig-zag), Ulysses, the 2-D grid and tensor
 *              parallelism's attention for comparison, forward and forward + backward, by
 *              tokens per rank, measured here and predicted on a profile (dgx-h100) by
 *              replaying each call's trace; then the profile's prediction at long contexts
 *              (1K to 1M tokens, a Llama-3-8B-like attention) from the lab's formulas
 *              (docs/cost-model.md, "Context parallelism"), with the crossover between the
 *              ring and Ulysses and where the ring's overlap hides its traffic.
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

/* The bench's methods: the lab's three designs, the grid, and tensor parallelism's
 * attention for comparison (no sequence split: every rank holds the whole sequence for its
 * H/n heads, computed with the kit's kernel, and pays the row-parallel output projection's
 * all-reduce of S x C floats that context parallelism does not; its backward the same
 * again for the QKV input gradient, Megatron's f). */
enum { B_RING, B_ZIGZAG, B_ULYSSES, B_USP, B_TP, B_COUNT };
static const char *B_NAMES[B_COUNT] = {"ring contiguous", "ring zig-zag", "ulysses", "2-D grid", "TP heads only"};

typedef struct {
    cp_config c;
    int method, u, bwd;
    int Sl, Hl, Hkvl;    /* this rank's query rows and heads (TP: S, H/n, Hkv/n)        */
    float *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv;
    float *ar;           /* TP: the [S, C] partial sums its all-reduces sum               */
    int *pos;            /* TP: 0 .. S-1 on the device                                    */
} bench_call;

static void bench_tp(bench_call *b, pl_stream *s) {
    int S = b->c.seq, d = b->c.head_dim;
    float scale = 1.0f / sqrtf((float)d);
    size_t nq = (size_t)S * b->Hl * d, nk = (size_t)S * b->Hkvl * d;
    kern_flash_block(b->o, b->lse, b->q, b->k, b->v, b->pos, b->pos, S, S, b->Hl, b->Hkvl, d, 1, scale, s);
    /* the output projection's partial sums [S, C], summed over the heads' ranks */
    if (pl_comm_size(b->c.comm) > 1) pl_allreduce(b->ar, b->ar, (size_t)S * b->c.heads * d, PL_SUM, b->c.comm, s);
    if (!b->bwd) return;
    pl_fill(b->dq, 0.0f, nq, s), pl_fill(b->dk, 0.0f, nk, s), pl_fill(b->dv, 0.0f, nk, s);
    kern_flash_block_backward(b->dq, b->dk, b->dv, b->q, b->k, b->v, b->o, b->lse, b->dout, b->pos, b->pos, S, S, b->Hl,
                              b->Hkvl, d, 1, scale, s);
    if (pl_comm_size(b->c.comm) > 1) pl_allreduce(b->ar, b->ar, (size_t)S * b->c.heads * d, PL_SUM, b->c.comm, s);
}

static void bench_run(void *arg) {
    bench_call *b = arg;
    pl_stream *s = pl_stream_comm();
    const cp_config *c = &b->c;
    switch (b->method) {
    case B_RING:
    case B_ZIGZAG:
        cp_ring_forward(c, b->q, b->k, b->v, b->o, b->lse, s);
        if (b->bwd) cp_ring_backward(c, b->q, b->k, b->v, b->o, b->lse, b->dout, b->dq, b->dk, b->dv, s);
        break;
    case B_ULYSSES:
        cp_ulysses_forward(c, b->q, b->k, b->v, b->o, s);
        if (b->bwd) cp_ulysses_backward(c, b->q, b->k, b->v, b->dout, b->dq, b->dk, b->dv, s);
        break;
    case B_USP:
        cp_usp_forward(c, b->u, b->q, b->k, b->v, b->o, s);
        if (b->bwd) cp_usp_backward(c, b->u, b->q, b->k, b->v, b->dout, b->dq, b->dk, b->dv, s);
        break;
    default: bench_tp(b, s); break;
    }
    pl_stream_sync(s);
}

static float *filled(size_t n, uint64_t id) {
    float *h = malloc(n * sizeof *h + 4), *d = pl_malloc_floats(n);
    for (size_t i = 0; i < n; i++) h[i] = (float)((double)(pl_rng_bits(77, id, i) >> 11) / 9007199254740992.0 * 2 - 1);
    pl_upload(d, h, n * sizeof *h);
    free(h);
    return d;
}

static char g_noreplay[200]; /* why the first replay failed, printed under the table */

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
    else if (!g_noreplay[0]) snprintf(g_noreplay, sizeof g_noreplay, "%s", err);
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

/* True when the ring's step at S tokens computes for at least as long as its K/V take to
 * travel: from there on its traffic costs nothing but the first block. */
static bool ring_step_hidden(const plc_profile *p, double S, int n, int Hkv, int H, int d) {
    double Sl = S / n, by, fl;
    kern_flash_block_cost((int)Sl, (int)(Sl / 2), H, Hkv, d, &by, &fl);
    return plc_kernel_time(p, fl, by) >= plc_p2p_time(p, n <= p->gpus_per_node, 2.0 * Sl * Hkv * d * 4);
}

/* Tensor parallelism's attention: H/n heads of the whole sequence (the causal half), and
 * the row-parallel output projection's all-reduce of S x C floats. */
static double tp_time(const plc_profile *p, double S, int n, int H, int Hkv, int d) {
    double by, fl, nodes = ceil((double)n / p->gpus_per_node);
    kern_flash_block_cost((int)S, (int)(S / 2), H / n, Hkv / n, d, &by, &fl);
    return plc_kernel_time(p, fl, by) + plc_coll_time(p, PL_OP_ALLREDUCE, n, (int)nodes, S * H * d * 4);
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

/* The grid's Ulysses degree: the smallest factor of n between 1 and n, or 0 (none). */
static int grid_u(int n) {
    for (int u = 2; u < n; u++)
        if (n % u == 0) return u;
    return 0;
}

/* Set up method m at S tokens (fwd+bwd when bwd), measure it, free it. false: not run. */
static bool bench_one(int m, int S, int bwd, const plc_profile *prof, double *meas, double *pred) {
    int n = pl_world(), H = 2 * n, Hkv = 2 * n, d = 32;
    bench_call b = {.c = {S, H, Hkv, d, 1, m == B_RING ? CP_CONTIGUOUS : CP_ZIGZAG, pl_comm_world()}, .method = m,
                    .u = grid_u(n), .bwd = bwd, .Hl = H, .Hkvl = Hkv};
    if (m == B_USP && b.u == 0) return false;
    if (m == B_TP) {
        b.Sl = S, b.Hl = H / n, b.Hkvl = Hkv / n;
        int *h = malloc((size_t)S * sizeof *h);
        for (int i = 0; i < S; i++) h[i] = i;
        b.pos = pl_malloc((size_t)S * sizeof(int));
        pl_upload(b.pos, h, (size_t)S * sizeof(int));
        free(h);
    } else {
        if (cp_config_check(&b.c, m == B_ULYSSES) != CP_OK) {
            drv_say("# cp_config_check refuses S %d for %s: skipped\n", S, B_NAMES[m]);
            return false;
        }
        int *pos = malloc(((size_t)S / n + 3) * sizeof *pos);
        b.Sl = cp_positions(&b.c, pl_rank(), pos);
        free(pos);
        if (b.Sl < 1 || b.Sl > S / n + 2) pl_usage_error("bench: cp_positions returned %d tokens", b.Sl);
    }
    size_t nq = (size_t)b.Sl * b.Hl * d, nk = (size_t)b.Sl * b.Hkvl * d;
    b.q = filled(nq, 1), b.k = filled(nk, 2), b.v = filled(nk, 3), b.dout = filled(nq, 4);
    if (m == B_TP) b.ar = pl_malloc_floats((size_t)S * H * d), pl_fill(b.ar, 0.0f, (size_t)S * H * d, NULL);
    b.o = pl_malloc_floats(nq), b.lse = pl_malloc_floats((size_t)b.Sl * b.Hl);
    b.dq = pl_malloc_floats(nq), b.dk = pl_malloc_floats(nk), b.dv = pl_malloc_floats(nk);
    measure(&b, prof, meas, pred);
    pl_free(b.q), pl_free(b.k), pl_free(b.v), pl_free(b.dout), pl_free(b.o), pl_free(b.lse);
    pl_free(b.dq), pl_free(b.dk), pl_free(b.dv), pl_free(b.pos), pl_free(b.ar);
    return true;
}

int lab10_mode_bench(void) {
    int n = pl_world(), H = 2 * n, Hkv = 2 * n, d = 32;
    plc_profile prof;
    char err[200] = "";
    bool have = plc_profile_load(&prof, L10.profile, err, sizeof err) == 0;
    drv_say("# lab10 bench: %d rank(s), device %s; causal attention, H %d, Hkv %d, d %d, median of the slowest rank; "
            "predicted: the trace of one call replayed on %s%s\n", n, pl_device_name(pl_info()->device), H, Hkv, d,
            L10.profile, have ? "" : " (profile not found)");
    if (grid_u(n)) drv_say("# 2-D grid: u = %d (Ulysses within rows of %d ranks), %d rows (the ring across them)\n", grid_u(n), grid_u(n), n / grid_u(n));
    drv_say("# TP heads only: every rank the whole sequence for H/n heads (the kit's kernel), plus the row-parallel "
            "projection's all-reduce of S x C floats (and the QKV input gradient's in the backward)\n");
    drv_say("# %8s %8s  %-16s %11s %11s   %11s %11s\n", "tokens", "S", "method", "fwd", "fwd+bwd", "fwd", "fwd+bwd");
    drv_say("# %8s %8s  %-16s %11s %11s   %11s %11s\n", "/rank", "", "", "(us)", "(us)", "pred us", "pred us");
    static const int SL[] = {32, 96, 256};
    for (size_t i = 0; i < sizeof SL / sizeof SL[0]; i++) {
        int S = SL[i] * n;
        for (int m = 0; m < B_COUNT; m++) {
            double meas[2], pred[2];
            if (!bench_one(m, S, 0, have ? &prof : NULL, &meas[0], &pred[0])) continue;
            bench_one(m, S, 1, have ? &prof : NULL, &meas[1], &pred[1]);
            char p0[16] = "n/a", p1[16] = "n/a";
            if (pred[0] >= 0) snprintf(p0, sizeof p0, "%.2f", pred[0]);
            if (pred[1] >= 0) snprintf(p1, sizeof p1, "%.2f", pred[1]);
            drv_say("  %8d %8d  %-16s %11.1f %11.1f   %11s %11s\n", SL[i], S, B_NAMES[m], meas[0], meas[1], p0, p1);
        }
    }
    if (g_noreplay[0])
        drv_say("# n/a: the trace replay failed: %s\n", g_noreplay);
    if (!have || n != 1) return 0;
    /* one rank prints the profile's long-context table for every world size of a node */
    int Hm = 32, Hkvm = 8, dm = 128;
    drv_say("# predicted on %s, forward, causal, H %d, Hkv %d, d %d, fp32 K/V; ring: zig-zag, each step's transfer under "
            "the next step's compute; Ulysses: four all-to-alls, no overlap; TP: H/n heads of the whole sequence and the "
            "output projection's all-reduce of S x C (ms)\n", prof.name, Hm, Hkvm, dm);
    drv_say("# %9s %4s %10s %10s %10s %8s  %s\n", "S", "n", "ring", "ulysses", "TP", "ring/uly", "faster (ring or ulysses)");
    for (int nn = 2; nn <= prof.gpus_per_node && nn <= Hkvm; nn *= 2) {
        const char *first = NULL;
        double change = -1, hidden = -1;
        for (double S = 1024; S <= 1048576; S *= 2) {
            double r = ring_time(&prof, S, nn, Hm, Hkvm, dm), u = ulysses_time(&prof, S, nn, Hm, Hkvm, dm),
                   t = tp_time(&prof, S, nn, Hm, Hkvm, dm);
            const char *w = r < u ? "ring" : "ulysses";
            if (!first) first = w;
            else if (change < 0 && strcmp(w, first) != 0) change = S;
            if (S == 1024 || S == 4096 || S == 16384 || S == 65536 || S == 262144 || S == 1048576)
                drv_say("  %9.0f %4d %10.3f %10.3f %10.3f %8.3f  %s\n", S, nn, r * 1e3, u * 1e3, t * 1e3, r / u, w);
        }
        if (change > 0) drv_say("crossover np=%d: %s faster up to S %.0f, %s from there\n", nn, first, change / 2,
                                strcmp(first, "ring") ? "ring" : "ulysses");
        else drv_say("crossover np=%d: none from 1K to 1M tokens, %s faster throughout\n", nn, first);
        for (double S = 16.0 * nn; S <= 1048576 && hidden < 0; S *= 2)
            if (ring_step_hidden(&prof, S, nn, Hkvm, Hm, dm)) hidden = S;
        if (hidden > 0) drv_say("ring overlap np=%d: each step's K/V transfer hides under its block's compute from S %.0f\n", nn, hidden);
        else drv_say("ring overlap np=%d: the K/V transfer outlasts a block's compute up to 1M tokens\n", nn);
    }
    /* two nodes: the ring's slowest link is the one between them (Ulysses stops at Hkv ranks) */
    int nn = 2 * prof.gpus_per_node;
    double hidden = -1;
    for (double S = 16.0 * nn; S <= 1048576 && hidden < 0; S *= 2)
        if (ring_step_hidden(&prof, S, nn, Hkvm, Hm, dm)) hidden = S;
    if (hidden > 0)
        drv_say("ring overlap np=%d (2 nodes, the profile's inter-node link between them): the transfer hides from S %.0f "
                "(%.3f ms forward there)\n", nn, hidden, ring_time(&prof, hidden, nn, Hm, Hkvm, dm) * 1e3);
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
 * sequence), 1: Ulysses, 2: the grid of rows of u ranks (its row's tokens, gathered by
 * Ulysses, for H/u heads; the ring's blocks those tokens' K and V). fp32, ints 4 bytes. */
static double design_bytes(int method, double S, int n, int u, int H, int Hkv, int d) {
    double rows = ceil(S / n), maxrows = rows + 1;
    double io = rows * (4.0 * H + 4.0 * Hkv) * d + rows * H, fwd, bwd;
    if (method == 0) {
        fwd = (n > 1 ? 4.0 * maxrows * Hkv * d : 0) + rows * H * (d + 1) + S;
        bwd = (n > 1 ? 8.0 * maxrows * Hkv * d : 0) + S;
    } else if (method == 1) {
        double common = rows * H * d + 2.0 * rows * n + S; /* the packing buffer, its orders, the positions */
        fwd = S * d * (2.0 * H + 2.0 * Hkv) / n + S * H / n + common;
        bwd = S * d * (4.0 * H + 4.0 * Hkv) / n + S * H / n + common;
    } else {
        /* the row's gathered tokens (mine) and the largest row's (maxS) on H/u and Hkv/u heads */
        double mine = u * rows, maxS = u * maxrows, wq = (double)H / u * d, wk = (double)Hkv / u * d, lse = mine * H / u;
        double common = rows * H * d + 2.0 * rows * u + S, ring_fwd = mine * wq + lse + 4.0 * maxS * wk;
        double ring_bwd = n / u > 1 ? 8.0 * maxS * wk : 0;
        fwd = 2.0 * mine * (wq + wk) + lse + ring_fwd + common;
        bwd = 4.0 * mine * (wq + wk) + lse + (ring_fwd > ring_bwd ? ring_fwd : ring_bwd) + common;
    }
    return 4.0 * (io + (fwd > bwd ? fwd : bwd));
}

typedef struct {
    cp_config c;
    int method;
    float *t[10]; /* q k v o lse dout dq dk dv, and one spare */
} long_call;

/* the peak bytes in use (this rank) over one forward and one backward, inputs included */
static double long_peak(int method, int u, int S, int H, int Hkv, int d) {
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
    } else if (method == 1) {
        cp_ulysses_forward(&b.c, b.t[0], b.t[1], b.t[2], b.t[3], s);
        cp_ulysses_backward(&b.c, b.t[0], b.t[1], b.t[2], b.t[5], b.t[6], b.t[7], b.t[8], s);
    } else {
        cp_usp_forward(&b.c, u, b.t[0], b.t[1], b.t[2], b.t[3], s);
        cp_usp_backward(&b.c, u, b.t[0], b.t[1], b.t[2], b.t[5], b.t[6], b.t[7], b.t[8], s);
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
    int n = pl_world(), H = 2 * n, Hkv = n, d = 16, u = grid_u(n);
    drv_say("# lab10 long: %d rank(s); peak bytes per rank over one forward + backward (inputs, outputs, scratch), "
            "the largest rank; H %d, Hkv %d, d %d, causal zig-zag; the 2-D grid at u = %d%s\n", n, H, Hkv, d, u,
            u ? "" : " (none: n has no factor 1 < u < n)");
    drv_say("# %8s %8s %12s %12s %7s %12s %12s %7s %12s %12s %7s\n", "S", "tok/rank", "ring", "formula", "ratio", "ulysses",
            "formula", "ratio", "2-D grid", "formula", "ratio");
    static const int SL[] = {32, 128, 512};
    for (size_t i = 0; i < sizeof SL / sizeof SL[0]; i++) {
        int S = SL[i] * n;
        double m[3], f[3];
        for (int k = 0; k < 3; k++) {
            m[k] = k == 2 && !u ? -1 : long_peak(k, u, S, H, Hkv, d);
            f[k] = k == 2 && !u ? -1 : design_bytes(k, S, n, u, H, Hkv, d);
        }
        char grid[48] = "           -            -       -";
        if (u) snprintf(grid, sizeof grid, "%12.0f %12.0f %7.3f", m[2], f[2], m[2] / f[2]);
        drv_say("  %8d %8d %12.0f %12.0f %7.3f %12.0f %12.0f %7.3f %s\n", S, SL[i], m[0], f[0], m[0] > 0 ? m[0] / f[0] : 0,
                m[1], f[1], m[1] > 0 ? m[1] / f[1] : 0, grid);
        drv_say("longmem np=%d S=%d ring=%.0f ring_formula=%.0f ulysses=%.0f ulysses_formula=%.0f grid=%.0f "
                "grid_formula=%.0f\n", n, S, m[0], f[0], m[1], f[1], m[2], f[2]);
    }
    if (n != 1) return 0;
    double budget = 80e9;
    int Hm = 32, Hkvm = 8, dm = 128;
    drv_say("# the longest sequence whose attention layer (forward + backward, one layer's q, k, v, o, their gradients "
            "and the scratch; no weights, no other layers) fits %.0f GB per GPU, H %d, Hkv %d, d %d, fp32, by the "
            "formulas above; the 2-D grid at u = 2\n", budget / 1e9, Hm, Hkvm, dm);
    drv_say("# %4s %14s %14s %14s\n", "n", "ring", "ulysses", "2-D (u = 2)");
    for (int nn = 1; nn <= 8; nn *= 2) {
        double best[3] = {0, 0, 0};
        for (int m = 0; m < 3; m++) {
            if (m == 1 && (Hm % nn || Hkvm % nn)) continue;
            if (m == 2 && (nn < 4 || nn % 2)) continue; /* a grid needs 1 < u < n */
            double lo = 1, hi = 1e12;
            while (hi - lo > 1) { /* bytes grow with S: bisect */
                double mid = floor((lo + hi) / 2);
                if (design_bytes(m, mid, nn, 2, Hm, Hkvm, dm) <= budget) lo = mid;
                else hi = mid;
            }
            best[m] = lo;
        }
        if (best[2] > 0) drv_say("  %4d %14.0f %14.0f %14.0f\n", nn, best[0], best[1], best[2]);
        else drv_say("  %4d %14.0f %14.0f %14s\n", nn, best[0], best[1], "-");
        drv_say("long np=%d ring_tokens=%.0f ulysses_tokens=%.0f grid_tokens=%.0f\n", nn, best[0], best[1], best[2]);
    }
    return 0;
}
