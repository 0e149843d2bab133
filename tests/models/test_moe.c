/* test_moe.c - the reference mixture-of-experts layer (models/internal/moe_ref.h) and the
 * kernels Lab 9 builds it from (kern_moe, kern_swiglu_backward):
 *   - every gradient of the float64 layer against central finite differences of its loss
 *     sum <dy, y> + daux * sum(aux), with capacity drops and two groups;
 *   - routing by the definitions on hand-made inputs: top-k ties, renormalised gates,
 *     capacity = ceil(T k / E cf), drops by lowest probability, the Switch loss value;
 *   - the float32 kernels' CPU references against float64 loops, the dispatchers bit for
 *     bit against them, their trace records against their cost functions.
 *   mpirun -np 1 build/cpu/tests/test_moe
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h"   // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, check_rel, check_record
#include "internal/moe_ref.h" // defines: llm_moe_* (the float64 reference)
#include "kern_moe.h"
#include "kern_swiglu.h"

static uint64_t g_state = 12345;
static double rnd(double lo, double hi) { /* xorshift64*, uniform */
    g_state ^= g_state >> 12, g_state ^= g_state << 25, g_state ^= g_state >> 27;
    return lo + (hi - lo) * (double)((g_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static double *drand(size_t n, double lo, double hi) {
    double *a = malloc((n + 1) * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = rnd(lo, hi);
    return a;
}

/* ---- the float64 layer against finite differences ---------------------------------- */

typedef struct {
    llm_moe_shape s;
    int G;
    double *x, *wr, *wg, *wu, *wd, *dy, daux;
} layer;

static double loss(layer *L) {
    int T = L->s.tokens, H = L->s.hidden;
    llm_moe_routing *rt = malloc((size_t)L->G * sizeof *rt);
    double *y = malloc((size_t)L->G * T * H * sizeof *y), sum = 0;
    for (int g = 0; g < L->G; g++) llm_moe_routing_alloc(&rt[g], &L->s);
    llm_moe_forward(&L->s, L->G, L->x, L->wr, L->wg, L->wu, L->wd, y, rt);
    for (size_t i = 0; i < (size_t)L->G * T * H; i++) sum += L->dy[i] * y[i];
    for (int g = 0; g < L->G; g++) sum += L->daux * rt[g].aux, llm_moe_routing_free(&rt[g]);
    free(rt);
    free(y);
    return sum;
}

/* Worst relative error of the analytic gradient g over `probes` coordinates of p. */
static double fd_check(layer *L, double *p, const double *g, size_t n, int probes) {
    double worst = 0, h = 1e-6;
    for (int q = 0; q < probes; q++) {
        size_t i = (size_t)(rnd(0, 1) * (double)n) % n;
        double keep = p[i];
        p[i] = keep + h;
        double up = loss(L);
        p[i] = keep - h;
        double down = loss(L);
        p[i] = keep;
        double fd = (up - down) / (2 * h), e = fabs(fd - g[i]) / fmax(1e-6, fabs(fd) + fabs(g[i]));
        if (e > worst) worst = e;
    }
    return worst;
}

static void test_gradients(int k, double cf) {
    layer L = {.s = {.tokens = 6, .hidden = 5, .ffn = 7, .experts = 4, .top_k = k, .capacity_factor = cf, .aux_alpha = 0.05},
               .G = 2, .daux = 1.3};
    int T = L.s.tokens, H = L.s.hidden, F = L.s.ffn, E = L.s.experts, G = L.G;
    L.x = drand((size_t)G * T * H, -1, 1), L.wr = drand((size_t)E * H, -1, 1);
    L.wg = drand((size_t)E * F * H, -0.5, 0.5), L.wu = drand((size_t)E * F * H, -0.5, 0.5);
    L.wd = drand((size_t)E * H * F, -0.5, 0.5), L.dy = drand((size_t)G * T * H, -1, 1);
    llm_moe_routing rt[2];
    double *y = malloc((size_t)G * T * H * sizeof *y), *dx = malloc((size_t)G * T * H * sizeof *dx);
    double *dwr = malloc((size_t)G * E * H * sizeof *dwr), *dwg = malloc((size_t)E * F * H * sizeof *dwg);
    double *dwu = malloc((size_t)E * F * H * sizeof *dwu), *dwd = malloc((size_t)E * H * F * sizeof *dwd);
    for (int g = 0; g < G; g++) llm_moe_routing_alloc(&rt[g], &L.s);
    llm_moe_forward(&L.s, G, L.x, L.wr, L.wg, L.wu, L.wd, y, rt);
    llm_moe_backward(&L.s, G, L.x, L.wr, L.wg, L.wu, L.wd, rt, L.dy, L.daux, dx, dwr, dwg, dwu, dwd);
    int dropped = 0;
    for (int g = 0; g < G; g++)
        for (int i = 0; i < T * k; i++) dropped += !rt[g].keep[i];
    /* the router's gradient is per group: the finite difference of the shared wr sees the sum */
    for (size_t i = 0; i < (size_t)E * H; i++) dwr[i] += dwr[(size_t)E * H + i];
    double e = fd_check(&L, L.x, dx, (size_t)G * T * H, 20);
    e = fmax(e, fd_check(&L, L.wr, dwr, (size_t)E * H, 20));
    e = fmax(e, fd_check(&L, L.wg, dwg, (size_t)E * F * H, 20));
    e = fmax(e, fd_check(&L, L.wu, dwu, (size_t)E * F * H, 20));
    e = fmax(e, fd_check(&L, L.wd, dwd, (size_t)E * H * F, 20));
    char name[200];
    snprintf(name, sizeof name, "float64 layer, k=%d cf=%.2f (%d of %d assignments dropped): dx, dWr, dWg, dWu, dWd vs "
             "central differences (worst rel err %.1e <= 1e-6)", k, cf, dropped, G * T * k, e);
    tap_check(e <= 1e-6, name);
    for (int g = 0; g < G; g++) llm_moe_routing_free(&rt[g]);
    free(L.x), free(L.wr), free(L.wg), free(L.wu), free(L.wd), free(L.dy);
    free(y), free(dx), free(dwr), free(dwg), free(dwu), free(dwd);
}

/* ---- routing by the definitions ---------------------------------------------------- */

static void test_routing(void) {
    llm_moe_shape s = {.tokens = 16, .hidden = 1, .ffn = 1, .experts = 8, .top_k = 2, .capacity_factor = 1.25, .aux_alpha = 0.01};
    tap_check(llm_moe_capacity(&s) == 5, "capacity: ceil(16 * 2 / 8 * 1.25) = 5");
    s = (llm_moe_shape){.tokens = 10, .experts = 4, .top_k = 1, .capacity_factor = 1.0};
    tap_check(llm_moe_capacity(&s) == 3, "capacity: ceil(10 * 1 / 4 * 1.0) = ceil(2.5) = 3");

    /* uniform logits: every expert ties; top-2 is experts 0 and 1, gates 1/2, aux = alpha */
    s = (llm_moe_shape){.tokens = 4, .hidden = 1, .ffn = 1, .experts = 4, .top_k = 2, .capacity_factor = 8, .aux_alpha = 0.01};
    double zeros[16] = {0};
    llm_moe_routing r;
    llm_moe_routing_alloc(&r, &s);
    llm_moe_route(&s, zeros, &r);
    int ok = 1;
    for (int t = 0; t < 4; t++) ok &= r.expert[2 * t] == 0 && r.expert[2 * t + 1] == 1 && r.gate[2 * t] == 0.5 && r.keep[2 * t];
    tap_check(ok, "ties go to the lower expert index; gates renormalised over the k chosen");
    /* f = (4/8, 4/8, 0, 0), P = 1/4 each: alpha * 4 * (1/2 * 1/4 * 2) = alpha */
    tap_check(fabs(r.aux - 0.01) < 1e-15, "Switch loss: alpha E sum f_i P_i with f over the k choices (uniform: alpha)");
    llm_moe_routing_free(&r);

    /* k = 1, every token to expert 0 with probabilities 0.9, 0.6, 0.8, 0.7: C = 2 keeps 0 and 2 */
    s = (llm_moe_shape){.tokens = 4, .hidden = 1, .ffn = 1, .experts = 2, .top_k = 1, .capacity_factor = 1, .aux_alpha = 0.01};
    double p0[4] = {0.9, 0.6, 0.8, 0.7}, logits[8];
    for (int t = 0; t < 4; t++) logits[2 * t] = log(p0[t]), logits[2 * t + 1] = log(1 - p0[t]);
    llm_moe_routing_alloc(&r, &s);
    llm_moe_route(&s, logits, &r);
    tap_check(r.keep[0] && !r.keep[1] && r.keep[2] && !r.keep[3] && r.gate[1] == 1.0,
              "capacity 2 of 4 tokens: the two most probable stay, by probability not position; k=1 gates are 1");
    /* f = (1, 0) before the drops, P_0 = mean(p0) = 0.75: aux = 0.01 * 2 * 0.75 */
    tap_check(fabs(r.aux - 0.015) < 1e-12, "Switch loss counts the choices before the drops");
    llm_moe_routing_free(&r);
}

/* ---- the float32 kernels ----------------------------------------------------------- */

static void test_kernels(void) {
    const int T = 7, k = 2, H = 33, R = 11;
    int slot[14] = {3, -1, 0, 5, -1, -1, 10, 1, 2, 9, 4, 6, 7, -1};
    float x[7 * 33], rows[11 * 33], sc[14], out[7 * 33], out2[7 * 33], dot[14], dot2[14];
    double want[11 * 33], wout[7 * 33], wdot[14];
    for (int i = 0; i < T * H; i++) x[i] = (float)rnd(-1, 1);
    for (int i = 0; i < R * H; i++) rows[i] = (float)rnd(-1, 1), want[i] = rows[i];
    for (int i = 0; i < T * k; i++) sc[i] = (float)rnd(0, 1);
    float scat[11 * 33];
    memcpy(scat, rows, sizeof scat);
    kern_moe_scatter_ref(scat, x, slot, sc, T, k, H);
    for (int a = 0; a < T * k; a++)
        for (int c = 0; slot[a] >= 0 && c < H; c++) want[slot[a] * H + c] = (double)((float)sc[a] * x[(a / k) * H + c]);
    check_rel("kern_moe_scatter_ref: rows[slot] = scale * x[t], other rows untouched", scat, want, (size_t)R * H, 0);
    kern_moe_gather_ref(out, rows, slot, sc, T, k, H);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < H; c++) {
            wout[t * H + c] = 0;
            for (int j = 0; j < k; j++)
                if (slot[t * k + j] >= 0) wout[t * H + c] += (double)sc[t * k + j] * rows[slot[t * k + j] * H + c];
        }
    check_rel("kern_moe_gather_ref: out[t] = sum_j weight * rows[slot] (dropped skipped)", out, wout, (size_t)T * H, 1e-6);
    kern_moe_rowdot_ref(dot, x, rows, slot, T, k, H);
    for (int a = 0; a < T * k; a++) {
        wdot[a] = 0;
        for (int c = 0; slot[a] >= 0 && c < H; c++) wdot[a] += (double)x[(a / k) * H + c] * rows[slot[a] * H + c];
    }
    check_rel("kern_moe_rowdot_ref: <a[t], rows[slot]>, 0 for dropped", dot, wdot, (size_t)T * k, 1e-6);

    /* the dispatchers on the cpu device: the references' bits, and a trace record each */
    double b, f;
    memcpy(scat, rows, sizeof scat);
    kern_moe_scatter(scat, x, slot, sc, T, k, H, NULL);
    kern_moe_cost(0, T, k, H, 10, &b, &f);
    check_record("moe_scatter", b, f);
    float ref2[11 * 33];
    memcpy(ref2, rows, sizeof ref2);
    kern_moe_scatter_ref(ref2, x, slot, sc, T, k, H);
    kern_moe_gather(out2, rows, slot, NULL, T, k, H, NULL);
    kern_moe_cost(1, T, k, H, 10, &b, &f);
    check_record("moe_gather", b, f);
    kern_moe_gather_ref(out, rows, slot, NULL, T, k, H);
    kern_moe_rowdot(dot2, x, rows, slot, T, k, H, NULL);
    kern_moe_cost(2, T, k, H, 10, &b, &f);
    check_record("moe_rowdot", b, f);
    tap_check(!memcmp(scat, ref2, sizeof scat) && !memcmp(out, out2, sizeof out) && !memcmp(dot, dot2, sizeof dot),
              "kern_moe_* dispatchers on the cpu device give their references' bits");

    /* SwiGLU backward: float64 formula, and central differences of the forward */
    enum { N = 257 };
    float g[N], u[N], d[N], dg[N], du[N], dg2[N], du2[N];
    double wg[N], wu[N], fd[N];
    for (int i = 0; i < N; i++) g[i] = (float)rnd(-8, 8), u[i] = (float)rnd(-2, 2), d[i] = (float)rnd(-1, 1);
    kern_swiglu_backward_ref(dg, du, d, g, u, N);
    for (int i = 0; i < N; i++) {
        double s = 1.0 / (1.0 + exp(-(double)g[i]));
        wg[i] = (double)d[i] * u[i] * s * (1 + g[i] * (1 - s));
        wu[i] = (double)d[i] * g[i] * s;
        double h = 1e-4, gp = g[i] + h, gm = g[i] - h;
        fd[i] = d[i] * u[i] * (gp / (1 + exp(-gp)) - gm / (1 + exp(-gm))) / (2 * h);
    }
    check_rel("kern_swiglu_backward_ref: dgate vs float64", dg, wg, N, 1e-6);
    check_rel("kern_swiglu_backward_ref: dup vs float64", du, wu, N, 1e-6);
    check_rel("kern_swiglu_backward_ref: dgate vs central differences of the forward", dg, fd, N, 1e-6);
    kern_swiglu_backward(dg2, du2, d, g, u, N, NULL);
    kern_swiglu_backward_cost(N, &b, &f);
    check_record("swiglu_bwd", b, f);
    tap_check(!memcmp(dg, dg2, sizeof dg) && !memcmp(du, du2, sizeof du), "kern_swiglu_backward on the cpu device: the reference's bits");
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_gradients(1, 1.0);
    test_gradients(2, 1.0);
    test_gradients(2, 0.5);
    test_routing();
    test_kernels();
    return tap_finish();
}
