/* test_gpt.c - the GPT-2 model of models/gpt.h on the device against the host reference
 * of models/gpt_host.h (plain loops, double accumulation), the head's gradients against
 * central finite differences of a float64 loss, the B/W split against the fused backward
 * (bit for bit) and against the trace (which GEMMs each half issues), the activation
 * records' bytes against the documented formulas, and micro-batch gradient accumulation
 * against one run on the whole batch. Prints one "ok - ..." / "not ok - ..." per check.
 *
 *   mpirun -np 1 build/cpu/tests/test_gpt
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record
#include "gpt.h"
#include "gpt_host.h"
#include "pl_instrument.h" // defines: pl_trace_events, pl_trace_count (what each call recorded)

#define FD_TOL 1e-4 /* float32 backward vs central differences of the float64 loss     */
#define FD_H 1e-3   /* finite-difference step (the float-rounded step is used exactly) */
#define L_LAYERS 3
#define MICRO 4

static const gpt_config CFG = {.seq = 5, .batch = 2, .hidden = 16, .heads = 4, .ffn = 32,
                               .vocab = 23, .max_pos = 8};
static uint64_t g_seed;
/* Device float32 vs host double accumulation, relative Frobenius error: 1e-5 on the cpu
 * device; 5e-3 on a GPU, where cuBLAS may run float GEMMs in TF32. */
static double g_tol = 1e-5;
static uint64_t g_id = 7000; /* test inputs' RNG ids, one per tensor */

/* ================================================================================== */
/* Helpers                                                                             */
/* ================================================================================== */

static size_t rows_of(const gpt_config *c) { return (size_t)c->seq * c->batch; }

static float *host_rand(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 1);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, g_seed, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}
static int *host_ids(size_t n, int vocab) {
    int *p = malloc(n * sizeof(int) + 1);
    for (size_t i = 0; i < n; i++) p[i] = (int)(pl_rng_bits(g_seed, g_id, i) % (uint64_t)vocab);
    g_id++;
    return p;
}
static float *fzeros(size_t n) { return calloc(n + 1, sizeof(float)); }
static void *dev_copy(const void *host, size_t bytes) {
    void *d = pl_malloc(bytes);
    pl_upload(d, host, bytes);
    return d;
}
static void check_close(const char *what, const float *got, const float *want, size_t n) {
    double e = rel_err_ff(got, want, n);
    char name[200];
    snprintf(name, sizeof name, "%s (rel err %.2e <= %.0e)", what, e, g_tol);
    tap_check(e <= g_tol, name);
}

/* Parameters (or gradients) of a part, host arrays, tensor by tensor: the worst relative
 * error, or with bitwise, whether every bit agrees. */
static void check_part(const char *what, const float *got, const float *want, const gpt_config *c,
                       gpt_part part, bool bitwise) {
    double worst = 0;
    const char *worst_name = "-", *first_diff = NULL;
    for (int i = 0; i < gpt_part_ntensors(part); i++) {
        gpt_tensor_info ti = gpt_tensor(c, part, i, 0);
        size_t n = (size_t)(ti.rows * ti.cols);
        double e = rel_err_ff(got + ti.offset, want + ti.offset, n);
        if (!(e <= worst)) worst = e, worst_name = ti.name;
        if (!first_diff && memcmp(got + ti.offset, want + ti.offset, n * sizeof(float)) != 0) first_diff = ti.name;
    }
    char name[240];
    if (bitwise) snprintf(name, sizeof name, "%s (bit for bit%s%s)", what, first_diff ? "; differs first in " : "", first_diff ? first_diff : "");
    else snprintf(name, sizeof name, "%s (worst %s: rel err %.2e <= %.0e)", what, worst_name, worst, g_tol);
    tap_check(bitwise ? !first_diff : worst <= g_tol, name);
}
/* The same with the first operand in device memory. */
static void check_part_dev(const char *what, const float *dev, const float *want, const gpt_config *c,
                           gpt_part part, bool bitwise) {
    float *got = download(dev, gpt_part_count(c, part));
    check_part(what, got, want, c, part, bitwise);
    free(got);
}

/* What the trace recorded since a mark: GEMM flops, and flops and bytes of GEMMs and
 * kernels together (what gpt_*_cost predicts). */
typedef struct {
    double gemm_flops, flops, bytes;
} recorded;
static size_t mark(void) { return pl_trace_count(); }
static recorded since(size_t m) {
    recorded r = {0, 0, 0};
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = m; i < pl_trace_count(); i++) {
        if (ev[i].kind != PL_OP_GEMM && ev[i].kind != PL_OP_KERNEL) continue;
        if (ev[i].kind == PL_OP_GEMM) r.gemm_flops += ev[i].flops;
        r.flops += ev[i].flops;
        r.bytes += (double)ev[i].bytes;
    }
    return r;
}
static bool close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

/* The trace of one call against gpt_block_cost of its phase(s). */
static void check_cost(const char *what, recorded r, double flops, double bytes) {
    char name[240];
    snprintf(name, sizeof name, "%s: trace %.0f flops, %.0f bytes; cost model %.0f flops, %.0f bytes",
             what, r.flops, r.bytes, flops, bytes);
    tap_check(close_to(r.flops, flops) && close_to(r.bytes, bytes), name);
}

/* ================================================================================== */
/* Configuration and initialisation                                                    */
/* ================================================================================== */

static void test_config(void) {
    char why[200] = "";
    tap_check(gpt_config_valid(&CFG, why, sizeof why), "config: the test's config is valid");
    gpt_config c = CFG;
    c.hidden = 18;
    bool bad = !gpt_config_valid(&c, why, sizeof why) && strstr(why, "multiple of heads");
    c = CFG, c.seq = 0;
    bad = bad && !gpt_config_valid(&c, why, sizeof why) && strstr(why, "seq 0");
    c = CFG, c.max_pos = 3;
    bad = bad && !gpt_config_valid(&c, why, sizeof why) && strstr(why, "max_pos 3");
    c = CFG, c.seq = 1 << 16, c.batch = 1 << 10, c.max_pos = 0;
    bad = bad && !gpt_config_valid(&c, why, sizeof why) && strstr(why, "too large");
    tap_check(bad, "config: hidden % heads, seq 0, max_pos < seq and int overflow are rejected with a reason");
    int ids[4] = {0, 22, 23, 5};
    bool ids_ok = gpt_ids_valid(ids, 2, 23, NULL, 0) && !gpt_ids_valid(ids, 4, 23, why, sizeof why) &&
                  strstr(why, "id 23 at index 2");
    ids[0] = -1;
    ids_ok = ids_ok && !gpt_ids_valid(ids, 1, 23, why, sizeof why);
    tap_check(ids_ok, "ids: out-of-range token ids are named");
}

static void test_init(void) {
    const gpt_config *c = &CFG;
    gpt_block_params d, h0, h1;
    gpt_block_params_alloc(&d, c);
    gpt_host_block_alloc(&h0, c);
    gpt_host_block_alloc(&h1, c);
    gpt_block_init(&d, c, 1, g_seed);
    gpt_host_block_init(&h0, c, 0, g_seed);
    gpt_host_block_init(&h1, c, 1, g_seed);
    check_part_dev("init: device layer 1 == host layer 1", d.base, h1.base, c, GPT_PART_BLOCK, true);
    tap_check(memcmp(h0.qkv_w, h1.qkv_w, (size_t)3 * c->hidden * c->hidden * sizeof(float)) != 0,
              "init: layers 0 and 1 get different weights (ids from the layer index)");
    gpt_embed_params de, he;
    gpt_head_params dh, hh;
    gpt_embed_params_alloc(&de, c);
    gpt_host_embed_alloc(&he, c);
    gpt_head_params_alloc(&dh, c);
    gpt_host_head_alloc(&hh, c);
    gpt_embed_init(&de, c, g_seed);
    gpt_host_embed_init(&he, c, g_seed);
    gpt_head_init(&dh, c, g_seed);
    gpt_host_head_init(&hh, c, g_seed);
    check_part_dev("init: device embedding == host", de.base, he.base, c, GPT_PART_EMBED, true);
    check_part_dev("init: device head == host", dh.base, hh.base, c, GPT_PART_HEAD, true);
    gpt_block_params_free(&d);
    gpt_embed_params_free(&de);
    gpt_head_params_free(&dh);
    gpt_host_params_free(h0.base);
    gpt_host_params_free(h1.base);
    gpt_host_params_free(he.base);
    gpt_host_params_free(hh.base);
}

/* ================================================================================== */
/* The block                                                                           */
/* ================================================================================== */

/* One block's parameters on both sides, one micro-batch's input and output gradient. */
typedef struct {
    gpt_block_params p, hp;
    float *hx, *hdy, *x, *dy;
    size_t NC;
} block_case;

static void block_case_init(block_case *b, const gpt_config *c, int layer) {
    b->NC = rows_of(c) * c->hidden;
    gpt_block_params_alloc(&b->p, c);
    gpt_block_init(&b->p, c, layer, g_seed);
    gpt_host_block_alloc(&b->hp, c);
    gpt_host_block_init(&b->hp, c, layer, g_seed);
    b->hx = host_rand(b->NC, -1, 1);
    b->hdy = host_rand(b->NC, -1, 1);
    b->x = dev_copy(b->hx, b->NC * sizeof(float));
    b->dy = dev_copy(b->hdy, b->NC * sizeof(float));
}
static void block_case_free(block_case *b) {
    gpt_block_params_free(&b->p);
    gpt_host_params_free(b->hp.base);
    free(b->hx);
    free(b->hdy);
    pl_free(b->x);
    pl_free(b->dy);
}

/* Results of one device forward + backward of a block_case. */
typedef struct {
    float *y, *dx, *g; /* host copies */
    recorded f, b, w;  /* trace of forward, B (or fused) and W */
} block_run;

typedef enum { RUN_FUSED, RUN_SPLIT } run_kind;

static block_run run_block(const block_case *bc, const gpt_config *c, bool recompute, run_kind kind,
                           gpt_workspace *ws) {
    block_run r = {0};
    gpt_block_params g;
    gpt_block_params_alloc(&g, c);
    pl_fill(g.base, 0, g.count, NULL);
    gpt_acts *a = gpt_acts_alloc(c, recompute);
    float *y = pl_malloc_floats(bc->NC), *dx = pl_malloc_floats(bc->NC);
    pl_poison(y, bc->NC, NULL);
    pl_poison(dx, bc->NC, NULL);
    size_t m = mark();
    gpt_block_forward(&bc->p, a, y, bc->x, ws, NULL);
    r.f = since(m);
    m = mark();
    if (kind == RUN_FUSED) {
        gpt_block_backward(&bc->p, &g, a, dx, bc->dy, ws, NULL);
        r.b = since(m);
    } else {
        gpt_block_backward_input(&bc->p, a, dx, bc->dy, ws, NULL);
        r.b = since(m);
        m = mark();
        gpt_block_backward_weight(&bc->p, &g, a, ws, NULL);
        r.w = since(m);
    }
    r.y = download(y, bc->NC);
    r.dx = download(dx, bc->NC);
    r.g = download(g.base, g.count);
    gpt_acts_free(a);
    pl_free(y);
    pl_free(dx);
    gpt_block_params_free(&g);
    return r;
}
static void block_run_free(block_run *r) {
    free(r->y);
    free(r->dx);
    free(r->g);
}

static bool same_floats(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void test_block(void) {
    const gpt_config *c = &CFG;
    double N = (double)rows_of(c), C = c->hidden, F = c->ffn, T = c->seq, b = c->batch;
    block_case bc;
    block_case_init(&bc, c, 2);
    gpt_workspace *ws = gpt_workspace_alloc(c, GPT_WS_RECOMPUTE);

    gpt_host_acts ha;
    gpt_host_acts_alloc(&ha, c);
    float *hy = fzeros(bc.NC), *hdx = fzeros(bc.NC);
    gpt_block_params hg;
    gpt_host_block_alloc(&hg, c);
    gpt_host_block_forward(c, &bc.hp, &ha, hy, bc.hx);
    gpt_host_block_backward(c, &bc.hp, &hg, &ha, hdx, bc.hdy);

    block_run fused = run_block(&bc, c, false, RUN_FUSED, ws);
    check_close("block forward vs host reference", fused.y, hy, bc.NC);
    check_close("block backward: dx vs host reference", fused.dx, hdx, bc.NC);
    check_part("block backward: every parameter gradient vs host reference", fused.g, hg.base, c, GPT_PART_BLOCK, false);

    block_run split = run_block(&bc, c, false, RUN_SPLIT, ws);
    tap_check(same_floats(split.y, fused.y, bc.NC) && same_floats(split.dx, fused.dx, bc.NC),
              "B then W: y and dx bit for bit as the fused backward");
    check_part("B then W: every parameter gradient as the fused backward", split.g, fused.g, c, GPT_PART_BLOCK, true);

    /* Which GEMMs each half issues, counted here from the shapes: every linear layer has one
     * GEMM for its input gradient and one for its weight gradient (2 N in out flops each),
     * attention has per sequence and head two T x T x hs products forward, four backward. */
    double linear = 2 * N * (3 * C * C + C * C + C * F + F * C), head_product = 2 * b * T * T * C;
    char name[240];
    snprintf(name, sizeof name, "B: GEMM flops %.0f = the input gradients' %.0f (no weight-gradient GEMM)",
             split.b.gemm_flops, linear + 4 * head_product);
    tap_check(close_to(split.b.gemm_flops, linear + 4 * head_product), name);
    snprintf(name, sizeof name, "W: GEMM flops %.0f = the weight gradients' %.0f (no input-gradient GEMM)",
             split.w.gemm_flops, linear);
    tap_check(close_to(split.w.gemm_flops, linear), name);
    snprintf(name, sizeof name, "forward: GEMM flops %.0f = %.0f; fused backward: %.0f = %.0f", split.f.gemm_flops,
             linear + 2 * head_product, fused.b.gemm_flops, 2 * linear + 4 * head_product);
    tap_check(close_to(split.f.gemm_flops, linear + 2 * head_product) &&
                  close_to(fused.b.gemm_flops, 2 * linear + 4 * head_product), name);

    double cf[5], cb[5];
    for (int ph = GPT_PHASE_F; ph <= GPT_PHASE_BW; ph++) gpt_block_cost(c, (gpt_phase)ph, &cf[ph], &cb[ph]);
    check_cost("cost F", split.f, cf[GPT_PHASE_F], cb[GPT_PHASE_F]);
    check_cost("cost B", split.b, cf[GPT_PHASE_B], cb[GPT_PHASE_B]);
    check_cost("cost W", split.w, cf[GPT_PHASE_W], cb[GPT_PHASE_W]);
    check_cost("cost BW (fused)", fused.b, cf[GPT_PHASE_BW], cb[GPT_PHASE_BW]);

    /* recomputation: the same bits, one rebuild per backward phase, each priced as R */
    uint64_t r0 = gpt_recompute_count();
    block_run rf = run_block(&bc, c, true, RUN_FUSED, ws);
    uint64_t r1 = gpt_recompute_count();
    block_run rs = run_block(&bc, c, true, RUN_SPLIT, ws);
    uint64_t r2 = gpt_recompute_count();
    tap_check(same_floats(rf.y, fused.y, bc.NC) && same_floats(rf.dx, fused.dx, bc.NC) &&
                  same_floats(rs.y, fused.y, bc.NC) && same_floats(rs.dx, fused.dx, bc.NC),
              "recompute: y and dx bit for bit as without (fused, and B then W)");
    check_part("recompute: fused backward's gradients as without", rf.g, fused.g, c, GPT_PART_BLOCK, true);
    check_part("recompute: B then W's gradients as without", rs.g, fused.g, c, GPT_PART_BLOCK, true);
    snprintf(name, sizeof name, "recompute count: %llu rebuild(s) in a fused backward (1), %llu in B then W (2)",
             (unsigned long long)(r1 - r0), (unsigned long long)(r2 - r1));
    tap_check(r1 - r0 == 1 && r2 - r1 == 2, name);
    check_cost("cost with recompute: F", rs.f, cf[GPT_PHASE_F], cb[GPT_PHASE_F]);
    check_cost("cost with recompute: B = R + B", rs.b, cf[GPT_PHASE_R] + cf[GPT_PHASE_B], cb[GPT_PHASE_R] + cb[GPT_PHASE_B]);
    check_cost("cost with recompute: W = R + W", rs.w, cf[GPT_PHASE_R] + cf[GPT_PHASE_W], cb[GPT_PHASE_R] + cb[GPT_PHASE_W]);
    check_cost("cost with recompute: fused = R + BW", rf.b, cf[GPT_PHASE_R] + cf[GPT_PHASE_BW], cb[GPT_PHASE_R] + cb[GPT_PHASE_BW]);
    snprintf(name, sizeof name, "R: GEMM flops %.0f = the forward's without the output projection %.0f",
             rs.w.gemm_flops - linear, linear - 2 * N * C * F + 2 * head_product);
    tap_check(close_to(rs.w.gemm_flops - linear, linear - 2 * N * C * F + 2 * head_product), name);

    block_run *runs[] = {&fused, &split, &rf, &rs};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) block_run_free(runs[i]);
    gpt_host_acts_free(&ha);
    gpt_host_params_free(hg.base);
    free(hy);
    free(hdx);
    gpt_workspace_free(ws);
    block_case_free(&bc);
}

/* W accumulates: two micro-batches through one block in a schedule's order
 * (F a, F b, B b, B a, W a, W b) against the host's two backward passes into one g. The
 * caller's x and dy buffers are overwritten as soon as F and B return, as a pipeline
 * reuses its receive buffers: the record must hold its own copies. */
static void test_two_micro_batches(bool recompute) {
    const gpt_config *c = &CFG;
    block_case bc;
    block_case_init(&bc, c, 0);
    float *hx2 = host_rand(bc.NC, -1, 1), *hdy2 = host_rand(bc.NC, -1, 1);
    float *x2 = dev_copy(hx2, bc.NC * sizeof(float)), *dy2 = dev_copy(hdy2, bc.NC * sizeof(float));
    gpt_workspace *ws = gpt_workspace_alloc(c, recompute ? GPT_WS_RECOMPUTE : 0);
    gpt_acts *a = gpt_acts_alloc(c, recompute), *b = gpt_acts_alloc(c, recompute);
    gpt_block_params g;
    gpt_block_params_alloc(&g, c);
    pl_fill(g.base, 0, g.count, NULL);
    float *y = pl_malloc_floats(bc.NC), *dxa = pl_malloc_floats(bc.NC), *dxb = pl_malloc_floats(bc.NC);
    gpt_block_forward(&bc.p, a, y, bc.x, ws, NULL);
    pl_poison(bc.x, bc.NC, NULL);
    gpt_block_forward(&bc.p, b, y, x2, ws, NULL);
    pl_poison(x2, bc.NC, NULL);
    gpt_block_backward_input(&bc.p, b, dxb, dy2, ws, NULL);
    pl_poison(dy2, bc.NC, NULL);
    gpt_block_backward_input(&bc.p, a, dxa, bc.dy, ws, NULL);
    pl_poison(bc.dy, bc.NC, NULL);
    gpt_block_backward_weight(&bc.p, &g, a, ws, NULL);
    gpt_block_backward_weight(&bc.p, &g, b, ws, NULL);

    gpt_host_acts ha;
    gpt_host_acts_alloc(&ha, c);
    gpt_block_params hg;
    gpt_host_block_alloc(&hg, c);
    float *hy = fzeros(bc.NC), *hdxa = fzeros(bc.NC), *hdxb = fzeros(bc.NC);
    gpt_host_block_forward(c, &bc.hp, &ha, hy, bc.hx);
    gpt_host_block_backward(c, &bc.hp, &hg, &ha, hdxa, bc.hdy);
    gpt_host_block_forward(c, &bc.hp, &ha, hy, hx2);
    gpt_host_block_backward(c, &bc.hp, &hg, &ha, hdxb, hdy2);

    const char *tag = recompute ? " (recompute)" : "";
    float *got_a = download(dxa, bc.NC), *got_b = download(dxb, bc.NC);
    double e = fmax(rel_err_ff(got_a, hdxa, bc.NC), rel_err_ff(got_b, hdxb, bc.NC));
    char name[240];
    snprintf(name, sizeof name, "two micro-batches, inputs overwritten after use%s: each dx vs host (rel err %.2e <= %.0e)",
             tag, e, g_tol);
    tap_check(e <= g_tol, name);
    snprintf(name, sizeof name, "two micro-batches%s: W accumulates (+=) both gradients", tag);
    check_part_dev(name, g.base, hg.base, c, GPT_PART_BLOCK, false);

    free(got_a), free(got_b), free(hy), free(hdxa), free(hdxb), free(hx2), free(hdy2);
    gpt_host_acts_free(&ha);
    gpt_host_params_free(hg.base);
    pl_free(x2), pl_free(dy2), pl_free(y), pl_free(dxa), pl_free(dxb);
    gpt_block_params_free(&g);
    gpt_acts_free(a);
    gpt_acts_free(b);
    gpt_workspace_free(ws);
    block_case_free(&bc);
}

/* ================================================================================== */
/* Memory: the bytes each record and workspace takes, measured by the harness           */
/* ================================================================================== */

static void check_bytes(const char *what, size_t measured, size_t reported, size_t formula) {
    char name[240];
    snprintf(name, sizeof name, "%s: %zu bytes allocated, %zu reported, %zu by the formula", what, measured,
             reported, formula);
    tap_check(measured == formula && reported == formula, name);
}

static void test_memory(void) {
    const gpt_config *c = &CFG;
    size_t N = rows_of(c), C = c->hidden, F = c->ffn, H = c->heads, T = c->seq, b = c->batch, V = c->vocab;
    size_t probs = b * H * T * T;
    size_t full = 4 * (N * (8 * C + 2 * F + 4) + probs), only_x = 4 * N * C, wstash = 4 * N * (7 * C + F);

    size_t m = pl_mem_in_use();
    gpt_acts *a = gpt_acts_alloc(c, false);
    size_t got_full = pl_mem_in_use() - m;
    m = pl_mem_in_use();
    gpt_acts *r = gpt_acts_alloc(c, true);
    size_t got_x = pl_mem_in_use() - m;
    check_bytes("record without recompute = 4(N(8C+2F+4) + bHT^2)", got_full, gpt_acts_bytes(c, false), full);
    check_bytes("record with recompute = 4NC (x only)", got_x, gpt_acts_bytes(c, true), only_x);
    char name[240];
    snprintf(name, sizeof name, "recompute makes the record smaller by %zu bytes = 4(N(7C+2F+4) + bHT^2) = %zu",
             got_full - got_x, 4 * (N * (7 * C + 2 * F + 4) + probs));
    tap_check(got_full - got_x == 4 * (N * (7 * C + 2 * F + 4) + probs), name);

    /* the W stash: the first B allocates it, later ones reuse it; a fused backward never */
    block_case bc;
    block_case_init(&bc, c, 0);
    gpt_workspace *ws = gpt_workspace_alloc(c, GPT_WS_RECOMPUTE);
    gpt_block_params g;
    gpt_block_params_alloc(&g, c);
    pl_fill(g.base, 0, g.count, NULL);
    float *y = pl_malloc_floats(bc.NC), *dx = pl_malloc_floats(bc.NC);
    size_t grew[3];
    for (int i = 0; i < 2; i++) {
        gpt_block_forward(&bc.p, a, y, bc.x, ws, NULL);
        m = pl_mem_in_use();
        gpt_block_backward_input(&bc.p, a, dx, bc.dy, ws, NULL);
        grew[i] = pl_mem_in_use() - m;
        gpt_block_backward_weight(&bc.p, &g, a, ws, NULL);
    }
    gpt_block_forward(&bc.p, r, y, bc.x, ws, NULL);
    m = pl_mem_in_use();
    gpt_block_backward(&bc.p, &g, r, dx, bc.dy, ws, NULL);
    grew[2] = pl_mem_in_use() - m;
    check_bytes("W stash, allocated by the first B = 4N(7C+F)", grew[0], gpt_acts_wstash_bytes(c), wstash);
    snprintf(name, sizeof name, "W stash: a second B allocates %zu bytes, a fused backward %zu (both 0)", grew[1], grew[2]);
    tap_check(grew[1] == 0 && grew[2] == 0, name);
    m = pl_mem_in_use();
    gpt_acts_free(a);
    gpt_acts_free(r);
    snprintf(name, sizeof name, "gpt_acts_free returns every byte (%zu of %zu)", m - pl_mem_in_use(), full + wstash + only_x);
    tap_check(m - pl_mem_in_use() == full + wstash + only_x, name);

    /* workspace parts and the head's record */
    size_t block = 4 * (N * (7 * C + F) + probs + 2 * C), rebuild = 4 * (N * (7 * C + 2 * F + 4) + probs);
    size_t head = 4 * N * (V + C);
    unsigned parts[3] = {0, GPT_WS_RECOMPUTE, GPT_WS_RECOMPUTE | GPT_WS_HEAD};
    size_t want[3] = {block, block + rebuild, block + rebuild + head};
    const char *what[3] = {"workspace = 4(N(7C+F) + bHT^2 + 2C)", "workspace + GPT_WS_RECOMPUTE: + 4(N(7C+2F+4) + bHT^2)",
                           "workspace + GPT_WS_HEAD: + 4N(V+C)"};
    for (int i = 0; i < 3; i++) {
        m = pl_mem_in_use();
        gpt_workspace *w = gpt_workspace_alloc(c, parts[i]);
        size_t got = pl_mem_in_use() - m;
        gpt_workspace_free(w);
        check_bytes(what[i], got, gpt_workspace_bytes(c, parts[i]), want[i]);
    }
    m = pl_mem_in_use();
    gpt_head_acts *ha = gpt_head_acts_alloc(c);
    size_t got = pl_mem_in_use() - m;
    gpt_head_acts_free(ha);
    check_bytes("head record = 4N(2C+V+4)", got, gpt_head_acts_bytes(c), 4 * N * (2 * C + V + 4));

    pl_free(y), pl_free(dx);
    gpt_block_params_free(&g);
    gpt_workspace_free(ws);
    block_case_free(&bc);
}

/* ================================================================================== */
/* Embedding and head                                                                  */
/* ================================================================================== */

static void test_embedding(void) {
    const gpt_config *c = &CFG;
    size_t N = rows_of(c), NC = N * c->hidden;
    gpt_embed_params p, hp, g, hg;
    gpt_embed_params_alloc(&p, c);
    gpt_embed_init(&p, c, g_seed);
    gpt_embed_params_alloc(&g, c);
    pl_fill(g.base, 0, g.count, NULL);
    gpt_host_embed_alloc(&hp, c);
    gpt_host_embed_init(&hp, c, g_seed);
    gpt_host_embed_alloc(&hg, c);
    int *htok = host_ids(N, 5); /* a small range: tokens repeat, their gradients add up */
    int *tok = dev_copy(htok, N * sizeof(int));
    float *hdx = host_rand(NC, -1, 1), *hx = fzeros(NC);
    float *x = pl_malloc_floats(NC), *dx = dev_copy(hdx, NC * sizeof(float));

    size_t m0 = mark();
    gpt_embed_forward(c, &p, x, tok, NULL);
    recorded f = since(m0);
    gpt_host_embed_forward(c, &hp, hx, htok);
    float *got = download(x, NC);
    check_close("embedding forward vs host reference", got, hx, NC);
    m0 = mark();
    gpt_embed_backward(c, &g, dx, tok, NULL);
    recorded b = since(m0);
    gpt_embed_backward(c, &g, dx, tok, NULL);
    gpt_host_embed_backward(c, &hg, hdx, htok);
    gpt_host_embed_backward(c, &hg, hdx, htok);
    check_part_dev("embedding backward, twice: dwte and dwpe accumulate, vs host", g.base, hg.base, c, GPT_PART_EMBED, false);
    double fl, by;
    gpt_embed_cost(c, false, &fl, &by);
    check_cost("cost embedding forward", f, fl, by);
    gpt_embed_cost(c, true, &fl, &by);
    check_cost("cost embedding backward", b, fl, by);

    free(htok), free(hdx), free(hx), free(got);
    pl_free(tok), pl_free(x), pl_free(dx);
    gpt_embed_params_free(&p);
    gpt_embed_params_free(&g);
    gpt_host_params_free(hp.base);
    gpt_host_params_free(hg.base);
}

/* Central difference of the float64 head loss in one float coordinate; the step is the
 * float-rounded one, so the quotient uses the perturbation that really happened. */
static double fd_coord(float *coord, const gpt_config *c, const gpt_head_params *p, const float *x,
                       const int *tgt) {
    float keep = *coord;
    float up = (float)(keep + FD_H * fmax(1.0, fabs(keep))), down = (float)(keep - FD_H * fmax(1.0, fabs(keep)));
    *coord = up;
    double lu = gpt_host_head_loss(c, p, x, tgt);
    *coord = down;
    double ld = gpt_host_head_loss(c, p, x, tgt);
    *coord = keep;
    return (lu - ld) / ((double)up - down);
}

static void test_head(void) {
    const gpt_config *c = &CFG;
    size_t N = rows_of(c), NC = N * c->hidden;
    const float scale = 0.37f;
    gpt_head_params p, hp, g, hg;
    gpt_head_params_alloc(&p, c);
    gpt_head_init(&p, c, g_seed);
    gpt_head_params_alloc(&g, c);
    pl_fill(g.base, 0, g.count, NULL);
    gpt_host_head_alloc(&hp, c);
    gpt_host_head_init(&hp, c, g_seed);
    gpt_host_head_alloc(&hg, c);
    float *hx = host_rand(NC, -1, 1), *hdx = fzeros(NC);
    int *htgt = host_ids(N, c->vocab);
    float *x = dev_copy(hx, NC * sizeof(float)), *dx = pl_malloc_floats(NC);
    int *tgt = dev_copy(htgt, N * sizeof(int));
    gpt_workspace *ws = gpt_workspace_alloc(c, GPT_WS_HEAD);
    gpt_head_acts *a = gpt_head_acts_alloc(c);
    gpt_host_head_acts ha;
    gpt_host_head_acts_alloc(&ha, c);

    size_t m0 = mark();
    double loss = gpt_head_forward(&p, a, x, tgt, ws, NULL);
    recorded f = since(m0);
    double hloss = gpt_host_head_forward(c, &hp, &ha, hx, htgt), loss64 = gpt_host_head_loss(c, &hp, hx, htgt);
    char name[240];
    snprintf(name, sizeof name, "head forward: mean loss %.7f vs host %.7f vs float64 %.7f (rel <= %.0e)", loss, hloss,
             loss64, g_tol);
    tap_check(fabs(loss - hloss) <= g_tol * fabs(hloss) && fabs(hloss - loss64) <= g_tol * fabs(loss64), name);
    m0 = mark();
    gpt_head_backward(&p, &g, a, dx, scale, ws, NULL);
    recorded b = since(m0);
    gpt_host_head_backward(c, &hp, &hg, &ha, hdx, scale);
    float *got = download(dx, NC);
    check_close("head backward (loss_scale 0.37): dx vs host reference", got, hdx, NC);
    check_part_dev("head backward (loss_scale 0.37): lnf and lm gradients vs host reference", g.base, hg.base, c, GPT_PART_HEAD, false);
    double fl, by;
    gpt_head_cost(c, false, &fl, &by);
    check_cost("cost head forward", f, fl, by);
    gpt_head_cost(c, true, &fl, &by);
    check_cost("cost head backward", b, fl, by);

    /* gradients of the plain mean loss against central differences of the float64 loss */
    pl_fill(g.base, 0, g.count, NULL);
    gpt_head_forward(&p, a, x, tgt, ws, NULL);
    gpt_head_backward(&p, &g, a, dx, 1.0f, ws, NULL);
    float *gg = download(g.base, g.count), *gdx = download(dx, NC);
    float *hcopy = malloc(NC * sizeof(float));
    memcpy(hcopy, hx, NC * sizeof(float));
    double worst = 0;
    const char *worst_what = "-";
    for (int k = 0; k < 10; k++) {
        uint64_t bits = pl_rng_bits(g_seed, 9999, (uint64_t)k);
        float *coord, grad;
        const char *what;
        if (k < 4) { /* lm.w */
            size_t i = bits % ((size_t)c->vocab * c->hidden);
            coord = hp.lm_w + i, grad = gg[gpt_tensor(c, GPT_PART_HEAD, GPT_LM_W, 0).offset + i], what = "lm.w";
        } else if (k < 6) {
            size_t i = bits % (size_t)c->hidden;
            coord = hp.lnf_w + i, grad = gg[gpt_tensor(c, GPT_PART_HEAD, GPT_LNF_W, 0).offset + i], what = "lnf.w";
        } else if (k < 8) {
            size_t i = bits % (size_t)c->hidden;
            coord = hp.lnf_b + i, grad = gg[gpt_tensor(c, GPT_PART_HEAD, GPT_LNF_B, 0).offset + i], what = "lnf.b";
        } else {
            size_t i = bits % NC;
            coord = hcopy + i, grad = gdx[i], what = "x";
        }
        double fd = fd_coord(coord, c, &hp, hcopy, htgt);
        double e = fabs(grad - fd) / fmax(fabs(fd), 1e-3);
        if (!(e <= worst)) worst = e, worst_what = what;
    }
    snprintf(name, sizeof name, "head gradients vs central differences of the float64 loss at 10 coordinates (worst %s: %.1e <= %.0e)",
             worst_what, worst, fmax(FD_TOL, g_tol));
    tap_check(worst <= fmax(FD_TOL, g_tol), name);

    free(hx), free(hdx), free(htgt), free(got), free(gg), free(gdx), free(hcopy);
    pl_free(x), pl_free(dx), pl_free(tgt);
    gpt_workspace_free(ws);
    gpt_head_acts_free(a);
    gpt_host_head_acts_free(&ha);
    gpt_head_params_free(&p);
    gpt_head_params_free(&g);
    gpt_host_params_free(hp.base);
    gpt_host_params_free(hg.base);
}

/* ================================================================================== */
/* Micro-batches: what the pipeline relies on                                          */
/* ================================================================================== */

/* The whole model (embedding, L_LAYERS blocks, head), serially on one rank: one run on a
 * batch of MICRO * b sequences, and MICRO runs on b sequences each with loss_scale 1/MICRO,
 * backward in GPipe's order with every W deferred to the end (as a zero-bubble schedule
 * defers them) and the middle layer recomputing. Both must give the same gradients. */
typedef struct {
    gpt_embed_params e;
    gpt_block_params b[L_LAYERS];
    gpt_head_params h;
} model;

static void model_alloc(model *m, const gpt_config *c, bool zero) {
    gpt_embed_params_alloc(&m->e, c);
    gpt_head_params_alloc(&m->h, c);
    for (int l = 0; l < L_LAYERS; l++) gpt_block_params_alloc(&m->b[l], c);
    if (zero) {
        pl_fill(m->e.base, 0, m->e.count, NULL);
        pl_fill(m->h.base, 0, m->h.count, NULL);
        for (int l = 0; l < L_LAYERS; l++) pl_fill(m->b[l].base, 0, m->b[l].count, NULL);
    } else {
        gpt_embed_init(&m->e, c, g_seed);
        gpt_head_init(&m->h, c, g_seed);
        for (int l = 0; l < L_LAYERS; l++) gpt_block_init(&m->b[l], c, l, g_seed);
    }
}
static void model_free(model *m) {
    gpt_embed_params_free(&m->e);
    gpt_head_params_free(&m->h);
    for (int l = 0; l < L_LAYERS; l++) gpt_block_params_free(&m->b[l]);
}

static void test_micro_batches(void) {
    gpt_config cm = CFG, cw = CFG;
    cw.batch = CFG.batch * MICRO;
    int T = CFG.seq, bm = cm.batch, bw = cw.batch, V = CFG.vocab;
    size_t Nm = rows_of(&cm), Nw = rows_of(&cw), C = CFG.hidden;
    int *tok_w = host_ids(Nw, V), *tgt_w = host_ids(Nw, V);
    model p, gw, gm;
    model_alloc(&p, &cw, false);
    model_alloc(&gw, &cw, true);
    model_alloc(&gm, &cw, true);

    /* one run on the whole batch */
    gpt_workspace *ws_w = gpt_workspace_alloc(&cw, GPT_WS_HEAD);
    gpt_head_acts *hw = gpt_head_acts_alloc(&cw);
    gpt_acts *aw[L_LAYERS];
    float *xw[L_LAYERS + 1], *dw[L_LAYERS + 1];
    for (int l = 0; l <= L_LAYERS; l++) xw[l] = pl_malloc_floats(Nw * C), dw[l] = pl_malloc_floats(Nw * C);
    for (int l = 0; l < L_LAYERS; l++) aw[l] = gpt_acts_alloc(&cw, false);
    int *tok = dev_copy(tok_w, Nw * sizeof(int)), *tgt = dev_copy(tgt_w, Nw * sizeof(int));
    gpt_embed_forward(&cw, &p.e, xw[0], tok, NULL);
    for (int l = 0; l < L_LAYERS; l++) gpt_block_forward(&p.b[l], aw[l], xw[l + 1], xw[l], ws_w, NULL);
    double loss_w = gpt_head_forward(&p.h, hw, xw[L_LAYERS], tgt, ws_w, NULL);
    gpt_head_backward(&p.h, &gw.h, hw, dw[L_LAYERS], 1.0f, ws_w, NULL);
    for (int l = L_LAYERS - 1; l >= 0; l--) gpt_block_backward(&p.b[l], &gw.b[l], aw[l], dw[l], dw[l + 1], ws_w, NULL);
    gpt_embed_backward(&cw, &gw.e, dw[0], tok, NULL);

    /* MICRO runs of b sequences: micro-batch k is sequences [k b, (k+1) b) of the batch */
    gpt_workspace *ws_m = gpt_workspace_alloc(&cm, GPT_WS_HEAD | GPT_WS_RECOMPUTE);
    gpt_head_acts *hm = gpt_head_acts_alloc(&cm);
    gpt_acts *am[MICRO][L_LAYERS];
    float *xm[MICRO][L_LAYERS + 1], *dm[MICRO][L_LAYERS + 1];
    int *tok_m[MICRO], *htok = malloc(Nm * sizeof(int)), *htgt = malloc(Nm * sizeof(int)), *tgt_m = pl_malloc(Nm * sizeof(int));
    double loss_m = 0;
    for (int k = 0; k < MICRO; k++) {
        for (int t = 0; t < T; t++)
            for (int j = 0; j < bm; j++) {
                htok[t * bm + j] = tok_w[t * bw + k * bm + j];
                htgt[t * bm + j] = tgt_w[t * bw + k * bm + j];
            }
        tok_m[k] = dev_copy(htok, Nm * sizeof(int));
        pl_upload(tgt_m, htgt, Nm * sizeof(int));
        for (int l = 0; l <= L_LAYERS; l++) xm[k][l] = pl_malloc_floats(Nm * C), dm[k][l] = pl_malloc_floats(Nm * C);
        for (int l = 0; l < L_LAYERS; l++) am[k][l] = gpt_acts_alloc(&cm, l == 1);
        gpt_embed_forward(&cm, &p.e, xm[k][0], tok_m[k], NULL);
        for (int l = 0; l < L_LAYERS; l++) gpt_block_forward(&p.b[l], am[k][l], xm[k][l + 1], xm[k][l], ws_m, NULL);
        loss_m += gpt_head_forward(&p.h, hm, xm[k][L_LAYERS], tgt_m, ws_m, NULL) / MICRO;
        gpt_head_backward(&p.h, &gm.h, hm, dm[k][L_LAYERS], 1.0f / MICRO, ws_m, NULL);
    }
    for (int k = MICRO - 1; k >= 0; k--) {
        for (int l = L_LAYERS - 1; l >= 0; l--)
            gpt_block_backward_input(&p.b[l], am[k][l], dm[k][l], dm[k][l + 1], ws_m, NULL);
        gpt_embed_backward(&cm, &gm.e, dm[k][0], tok_m[k], NULL);
    }
    for (int k = 0; k < MICRO; k++)
        for (int l = 0; l < L_LAYERS; l++) gpt_block_backward_weight(&p.b[l], &gm.b[l], am[k][l], ws_m, NULL);

    char name[240];
    snprintf(name, sizeof name, "%d micro-batches: mean of the micro-batch losses %.7f = whole-batch loss %.7f",
             MICRO, loss_m, loss_w);
    tap_check(fabs(loss_m - loss_w) <= 1e-6 * fabs(loss_w), name);
    float *want = download(gw.e.base, gw.e.count);
    check_part_dev("micro-batches with loss_scale 1/4: embedding gradient = whole batch's", gm.e.base, want, &cw, GPT_PART_EMBED, false);
    free(want);
    for (int l = 0; l < L_LAYERS; l++) {
        want = download(gw.b[l].base, gw.b[l].count);
        snprintf(name, sizeof name, "micro-batches with loss_scale 1/4: block %d gradient = whole batch's%s", l,
                 l == 1 ? " (recomputing, W deferred)" : " (W deferred)");
        check_part_dev(name, gm.b[l].base, want, &cw, GPT_PART_BLOCK, false);
        free(want);
    }
    want = download(gw.h.base, gw.h.count);
    check_part_dev("micro-batches with loss_scale 1/4: head gradient = whole batch's", gm.h.base, want, &cw, GPT_PART_HEAD, false);
    free(want);

    for (int k = 0; k < MICRO; k++) {
        for (int l = 0; l <= L_LAYERS; l++) pl_free(xm[k][l]), pl_free(dm[k][l]);
        for (int l = 0; l < L_LAYERS; l++) gpt_acts_free(am[k][l]);
        pl_free(tok_m[k]);
    }
    for (int l = 0; l <= L_LAYERS; l++) pl_free(xw[l]), pl_free(dw[l]);
    for (int l = 0; l < L_LAYERS; l++) gpt_acts_free(aw[l]);
    pl_free(tok), pl_free(tgt), pl_free(tgt_m);
    free(tok_w), free(tgt_w), free(htok), free(htgt);
    gpt_head_acts_free(hw);
    gpt_head_acts_free(hm);
    gpt_workspace_free(ws_w);
    gpt_workspace_free(ws_m);
    model_free(&p);
    model_free(&gw);
    model_free(&gm);
}

/* p -= lr g on a block, against the same float arithmetic on the host. */
static void test_sgd(void) {
    const gpt_config *c = &CFG;
    gpt_block_params p;
    gpt_block_params_alloc(&p, c);
    gpt_block_init(&p, c, 0, g_seed);
    float *hp = download(p.base, p.count), *hg = host_rand(p.count, -1, 1), *want = fzeros(p.count);
    float *g = dev_copy(hg, p.count * sizeof(float));
    const float lr = 0.125f;
    for (size_t i = 0; i < p.count; i++) want[i] = hp[i] + hg[i] * -lr;
    gpt_sgd_step(p.base, g, p.count, lr, NULL);
    float *got = download(p.base, p.count);
    check_close("sgd step: p -= lr g", got, want, p.count);
    free(hp), free(hg), free(want), free(got);
    pl_free(g);
    gpt_block_params_free(&p);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    g_seed = pl_info()->seed;
    if (pl_info()->device == PL_DEVICE_CUDA) g_tol = 5e-3;
    test_config();
    test_init();
    test_block();
    test_two_micro_batches(false);
    test_two_micro_batches(true);
    test_memory();
    test_embedding();
    test_head();
    test_micro_batches();
    test_sgd();
    return tap_finish();
}
