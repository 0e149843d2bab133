/* pl_calibrate.c - build the "this machine" cost-model profile from measurements:
 *   links:  Lab 0's point-to-point sweep (labs/00-hello --p2p-json FILE): per pair kind
 *           (same host / between hosts), alpha = the one-way latency of the smallest
 *           message, beta = bytes / (time - alpha) of the largest one, median over pairs;
 *   device: a square pl_gemm (peak = its flop rate), a tall-skinny one of a typical lab
 *           step (128 x 2048 x 512: efficiency = its rate / peak), a large pl_copy
 *           (memory bandwidth: 2 x bytes / time), a 1x1x1 pl_gemm (launch overhead) and
 *           kern_gelu_forward (the elementwise rate: its counted flops / time; a lower
 *           bound where GELU is limited by memory, as on a GPU).
 * Usage: mpirun -np 1 pl-calibrate --p2p-json FILE [--out FILE] [--name NAME] [--gemm N]
 * The formulas are in docs/cost-model.md. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl.h"           // defines: pl_init, pl_gemm, pl_copy, pl_now, pl_usage_error
#include "kern_gelu.h"    // defines: kern_gelu_forward (the elementwise-rate probe)
#include "pl_costmodel.h" // defines: plc_profile, plc_profile_write

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median alpha (s) and beta (B/s) over the pairs with same_host == want; 0 when none. */
static int fit_links(cJSON *pairs, int want, double *alpha, double *beta) {
    int np = cJSON_GetArraySize(pairs), k = 0;
    double *a = calloc((size_t)np + 1, sizeof *a), *b = calloc((size_t)np + 1, sizeof *b);
    for (int i = 0; i < np; i++) {
        cJSON *p = cJSON_GetArrayItem(pairs, i), *pts = cJSON_GetObjectItem(p, "points");
        if (cJSON_IsTrue(cJSON_GetObjectItem(p, "same_host")) != want || !cJSON_IsArray(pts)) continue;
        int n = cJSON_GetArraySize(pts);
        if (n < 2) continue;
        cJSON *lo = cJSON_GetArrayItem(pts, 0), *hi = cJSON_GetArrayItem(pts, n - 1);
        double t_lo = cJSON_GetNumberValue(cJSON_GetObjectItem(lo, "latency_us")) * 1e-6;
        double t_hi = cJSON_GetNumberValue(cJSON_GetObjectItem(hi, "latency_us")) * 1e-6;
        double s_hi = cJSON_GetNumberValue(cJSON_GetObjectItem(hi, "bytes"));
        if (!(t_lo > 0) || !(t_hi > t_lo) || !(s_hi > 0)) continue;
        a[k] = t_lo;
        b[k] = s_hi / (t_hi - t_lo);
        k++;
    }
    if (k) {
        *alpha = median(a, k);
        *beta = median(b, k);
    }
    free(a);
    free(b);
    return k;
}

typedef struct { int n; float *A, *C; } gemm_arg;
static double time_best(void (*fn)(void *), void *arg, int reps) {
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        pl_device_sync();
        double t0 = pl_now();
        fn(arg);
        pl_device_sync();
        double t = pl_now() - t0;
        if (t < best) best = t;
    }
    return best;
}
static void run_gemm(void *p) {
    gemm_arg *g = p;
    pl_gemm(false, false, g->n, g->n, g->n, 1, g->A, g->n, g->A, g->n, 0, g->C, g->n, NULL);
}
typedef struct { float *dst, *src; size_t bytes; } copy_arg;
static void run_copy(void *p) {
    copy_arg *c = p;
    pl_copy(c->dst, c->src, c->bytes, NULL);
}
static void run_gelu(void *p) {
    copy_arg *c = p;
    kern_gelu_forward(c->dst, c->src, c->bytes / sizeof(float), NULL);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    const char *json_path = NULL, *out = "build/profiles/this-machine.profile", *name = "this-machine";
    int gn = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) pl_usage_error("%s needs a value", a);
        if (!strcmp(a, "--p2p-json")) json_path = argv[++i];
        else if (!strcmp(a, "--out")) out = argv[++i];
        else if (!strcmp(a, "--name")) name = argv[++i];
        else if (!strcmp(a, "--gemm")) gn = atoi(argv[++i]);
        else pl_usage_error("unknown flag '%s' (use --p2p-json FILE [--out FILE] [--name NAME] [--gemm N])", a);
    }
    if (!json_path) pl_usage_error("--p2p-json FILE is required (make it with: mpirun -np 2 build/cpu/labs/lab00 --p2p-json FILE)");
    if (gn < 16 || gn > 8192) pl_usage_error("--gemm: size %d out of range 16..8192", gn);
    FILE *f = fopen(json_path, "r");
    if (!f) pl_usage_error("cannot read '%s'", json_path);
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    cJSON *root = cJSON_Parse(text), *pairs = root ? cJSON_GetObjectItem(root, "pairs") : NULL;
    if (!cJSON_IsArray(pairs)) pl_usage_error("'%s' is not a Lab 0 --p2p-json file (no \"pairs\" array)", json_path);

    plc_profile p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "%s", name);
    p.elem_bytes = 4; /* the labs' fp32: the precision of everything measured below */
    int world = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "world"));
    int nodes = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "nodes"));
    p.nodes = nodes > 0 ? nodes : 1;
    p.gpus_per_node = world > 0 ? (world + p.nodes - 1) / p.nodes : 1;
    int intra = fit_links(pairs, 1, &p.intra_alpha, &p.intra_beta);
    int inter = fit_links(pairs, 0, &p.inter_alpha, &p.inter_beta);
    if (!intra && !inter) pl_usage_error("'%s' has no pair with at least two sizes to fit", json_path);
    if (!intra) p.intra_alpha = p.inter_alpha, p.intra_beta = p.inter_beta;
    if (!inter) p.inter_alpha = p.intra_alpha, p.inter_beta = p.intra_beta;
    const char *dev = cJSON_GetStringValue(cJSON_GetObjectItem(root, "device"));
    const char *comm = cJSON_GetStringValue(cJSON_GetObjectItem(root, "comm"));

    /* Device roofline, measured with the harness's own calls. */
    gemm_arg g = {gn, pl_malloc_floats((size_t)gn * gn), pl_malloc_floats((size_t)gn * gn)};
    pl_fill(g.A, 0.5f, (size_t)gn * gn, NULL);
    double tg = time_best(run_gemm, &g, 3);
    p.peak_flops = 2.0 * gn * gn * (double)gn / tg;
    /* The labs' GEMMs are tall and skinny (tokens x hidden): their rate sets the efficiency. */
    gemm_arg sk = {0, pl_malloc_floats(2048 * 512), pl_malloc_floats(128 * 2048)};
    pl_fill(sk.A, 0.5f, 2048 * 512, NULL);
    double ts = 1e30;
    for (int i = 0; i < 5; i++) {
        pl_device_sync();
        double t0 = pl_now();
        pl_gemm(false, true, 128, 2048, 512, 1, sk.A, 512, sk.A, 512, 0, sk.C, 2048, NULL);
        pl_device_sync();
        if (pl_now() - t0 < ts) ts = pl_now() - t0;
    }
    p.gemm_eff = 2.0 * 128 * 2048 * 512 / ts / p.peak_flops;
    if (p.gemm_eff > 1) p.gemm_eff = 1;
    pl_free(sk.A);
    pl_free(sk.C);
    gemm_arg tiny = {1, g.A, g.C};
    p.launch = time_best(run_gemm, &tiny, 20);
    size_t bytes = 64u << 20;
    copy_arg c = {pl_malloc(bytes), pl_malloc(bytes), bytes};
    pl_memset(c.src, 0, bytes, NULL);
    pl_memset(c.dst, 0, bytes, NULL);
    p.mem_bw = 2.0 * bytes / time_best(run_copy, &c, 3); /* a copy reads and writes */
    /* Elementwise rate: the flops GELU records (kernels/kern_dispatch.h) over its time. */
    copy_arg gl = {c.dst, c.src, (size_t)4 << 20};
    /* tanhf's cost depends on its argument: probe with activations of the labs' scale */
    pl_rng_fill(pl_tensor_view(c.src, 1, (int64_t)(gl.bytes / sizeof(float))), (int64_t)(gl.bytes / sizeof(float)),
                0, 0, 1, 1, PL_RNG_NORMAL, 0, 1);
    double tgl = time_best(run_gelu, &gl, 3);
    const pl_trace_event *last = &pl_trace_events()[pl_trace_count() - 1];
    PL_CHECK(last->kind == PL_OP_KERNEL && last->flops > 0, "calibrate: GELU did not record its flops");
    p.vector_flops = last->flops / (tgl > p.launch ? tgl - p.launch : tgl);
    snprintf(p.description, sizeof p.description, "calibrated: %d rank(s) on %d node(s), device %s, comm %s, %d pair(s) fitted",
             world, p.nodes, dev ? dev : "?", comm ? comm : "?", intra + inter);
    if (plc_profile_write(&p, out) != 0) pl_usage_error("cannot write '%s'", out);
    /* what was written must load: the labs read it by name */
    plc_profile back;
    char why[300], path[1100];
    snprintf(path, sizeof path, "%s%s", strchr(out, '/') ? "" : "./", out); /* a path, never a name */
    if (plc_profile_load(&back, path, why, sizeof why) != 0)
        pl_usage_error("the profile written to '%s' does not load: %s", out, why);
    printf("wrote %s: gemm %.1f GFLOP/s (efficiency %.2f at 128x2048x512), elementwise %.2f GFLOP/s, memory %.1f GB/s, launch %.2f us, intra %.2f us + %.2f GB/s, inter %.2f us + %.2f GB/s\n",
           out, p.peak_flops / 1e9, p.gemm_eff, p.vector_flops / 1e9, p.mem_bw / 1e9, p.launch * 1e6, p.intra_alpha * 1e6, p.intra_beta / 1e9,
           p.inter_alpha * 1e6, p.inter_beta / 1e9);
    cJSON_Delete(root);
    pl_free(g.A);
    pl_free(g.C);
    pl_free(c.dst);
    pl_free(c.src);
    pl_finalize();
    return 0;
}
