/* test_kernels_zero.c - the kernels of the sharded data-parallel lab: bf16 conversion and
 * global-norm clipping with the AdamW step that applies it.
 *
 * bf16 rounding is checked against an independent rule (the two bf16 neighbours of x, the
 * nearer in double, ties to the even mantissa) over random values, every tie, subnormals,
 * the edges of the range, infinities and NaNs; the sum of squares against float64; the
 * clipped AdamW against kern_optim's AdamW on a pre-scaled gradient (bit for bit: the same
 * float operations); the mixed-precision step against the fp32 step followed by rounding.
 * Each dispatcher must give its reference's bits on the device it runs on (--device cuda
 * runs the CUDA versions: the same program is the GPU test). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/check.h" // defines: tap_check, rel_err, download
#include "kern_bf16.h"
#include "kern_clip.h"
#include "kern_optim.h"
#include "pl.h"

static float *randf(size_t n, uint64_t id, float lo, float hi) {
    float *p = malloc(n * sizeof *p + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, 11, id, PL_RNG_UNIFORM, lo, hi);
    return p;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Round to nearest even, the long way: compare the two bf16 values around x. */
static uint16_t nearest_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* same sign: magnitudes lo <= |x| < hi */
    double dl = fabs((double)x - pl_bf16_to_float(lo));
    uint32_t hu = (uint32_t)hi << 16;
    double hv = (hu & 0x7F800000u) == 0x7F800000u ? INFINITY * (x < 0 ? -1 : 1) : (double)from_bits(hu);
    /* past the largest finite bf16, the halfway point to 2^128 decides */
    double dh = isinf(hv) ? fabs(ldexp(1.0, 128) * (x < 0 ? -1 : 1) - (double)x) : fabs(hv - (double)x);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void test_bf16(void) {
    size_t n = 1 << 16;
    float *x = randf(n, 1, -3, 3);
    /* ties, subnormals, range edges, infinities, NaNs, signed zeros, the largest finite */
    uint32_t special[] = {0x3F808000u, 0x3F818000u, 0xBF808000u, 0x00008000u, 0x00018000u, 0x00000001u,
                          0x007FFFFFu, 0x7F7F8000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                          0x7FC00000u, 0x7F800001u, 0xFFC00001u, 0x00000000u, 0x80000000u, 0x3F7FFFFFu};
    size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < ns; i++) x[i] = from_bits(special[i]);
    for (size_t i = ns; i < 4096; i++) x[i] = from_bits((pl_rng_bits(5, 5, i) & 0xFFFF8000u) | 0x8000u); /* exact ties */
    uint16_t *h = malloc(n * 2), *want = malloc(n * 2);
    for (size_t i = 0; i < n; i++) want[i] = nearest_bf16(x[i]);
    kern_bf16_from_f32_ref(h, x, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != want[i];
    char name[200];
    snprintf(name, sizeof name, "bf16 rounding reference: %zu of %zu values differ from the nearest bf16 (ties to even, NaN kept)", bad, n);
    tap_check(bad == 0, name);
    int nan_ok = isnan(pl_bf16_to_float(h[12])) && isnan(pl_bf16_to_float(h[13])) && isinf(pl_bf16_to_float(h[8]));
    tap_check(nan_ok, "bf16: NaN payloads stay NaN, the largest float rounds to infinity");
    /* the dispatchers on the device in use */
    float *dx = pl_malloc_floats(n), *back = pl_malloc_floats(n);
    uint16_t *dh = pl_malloc(n * 2), *got = malloc(n * 2);
    pl_upload(dx, x, n * 4);
    kern_bf16_from_f32(dh, dx, n, NULL);
    pl_device_sync();
    pl_download(got, dh, n * 2);
    tap_check(memcmp(got, h, n * 2) == 0, "kern_bf16_from_f32 on the device gives the reference's words");
    kern_bf16_to_f32(back, dh, n, NULL);
    float *wide = download(back, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float w = pl_bf16_to_float(h[i]);
        bad += memcmp(&w, &wide[i], 4) != 0;
    }
    tap_check(bad == 0, "kern_bf16_to_f32 widens exactly (16 zero bits appended)");
    pl_free(dx), pl_free(back), pl_free(dh);
    free(x), free(h), free(want), free(got), free(wide);
}

static void test_clip(void) {
    size_t n = 10007;
    float *g = randf(n, 2, -0.5f, 0.5f);
    double s64 = 0;
    for (size_t i = 0; i < n; i++) s64 += (double)g[i] * g[i];
    float *dg = pl_malloc_floats(n), *acc = pl_malloc_floats(2);
    pl_upload(dg, g, n * 4);
    pl_fill(acc, 1.5f, 1, NULL);
    kern_clip_sumsq(acc, dg, n, NULL);
    kern_clip_sumsq(acc, dg, n / 2, NULL); /* it accumulates */
    double s2 = 0;
    for (size_t i = 0; i < n / 2; i++) s2 += (double)g[i] * g[i];
    float *h = download(acc, 1);
    double want = 1.5 + s64 + s2;
    char name[200];
    snprintf(name, sizeof name, "kern_clip_sumsq accumulates sums of squares (rel err %.1e vs float64)", fabs(h[0] - want) / want);
    tap_check(fabs(h[0] - want) / want <= 1e-6, name);
    free(h);
    /* bf16: the squares of the widened words */
    uint16_t *gb = malloc(n * 2), *dgb = pl_malloc(n * 2);
    kern_bf16_from_f32_ref(gb, g, n);
    double sb = 0;
    for (size_t i = 0; i < n; i++) sb += (double)pl_bf16_to_float(gb[i]) * pl_bf16_to_float(gb[i]);
    pl_upload(dgb, gb, n * 2);
    pl_fill(acc, 0.0f, 1, NULL);
    kern_clip_sumsq_bf16(acc, dgb, n, NULL);
    h = download(acc, 1);
    tap_check(fabs(h[0] - sb) / sb <= 1e-6, "kern_clip_sumsq_bf16 sums the squares of the widened words");
    free(h);
    /* the coefficient: clips above max_norm, 1 below */
    float in[2] = {(float)s64, 0.0f}, *din = pl_malloc_floats(2);
    pl_upload(din, in, 8);
    kern_clip_coef(din + 1, din, 0.5f, NULL);
    h = download(din, 2);
    double c = 0.5 / (sqrt(s64) + 1e-6);
    tap_check(fabs(h[1] - c) / c <= 1e-6, "kern_clip_coef = max_norm / (norm + 1e-6) when the norm exceeds max_norm");
    kern_clip_coef(din + 1, din, 1e6f, NULL);
    free(h);
    h = download(din, 2);
    tap_check(h[1] == 1.0f, "kern_clip_coef = 1 when the norm is below max_norm");
    free(h);

    /* AdamW with a clipped gradient == kern_optim's AdamW on the gradient scaled first */
    float *p = randf(n, 3, -1, 1), *m = randf(n, 4, -0.1f, 0.1f), *v = randf(n, 5, 0, 0.01f);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4), *gs = malloc(n * 4), coef = 0.37f;
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
    for (size_t i = 0; i < n; i++) gs[i] = coef * g[i];
    kern_optim_adamw_ref(p2, m2, v2, gs, n, 1e-2f, 0.9f, 0.95f, 1e-6f, 0.1f, 3);
    float *dp = pl_malloc_floats(n), *dm = pl_malloc_floats(n), *dv = pl_malloc_floats(n), *dc = pl_malloc_floats(1);
    pl_upload(dp, p, n * 4), pl_upload(dm, m, n * 4), pl_upload(dv, v, n * 4), pl_upload(dc, &coef, 4);
    kern_clip_adamw(dp, dm, dv, dg, dc, n, 1e-2f, 0.9f, 0.95f, 1e-6f, 0.1f, 3, NULL);
    float *hp = download(dp, n), *hm = download(dm, n);
    double e = rel_err_ff(hp, p2, n), em = rel_err_ff(hm, m2, n);
    snprintf(name, sizeof name, "kern_clip_adamw = AdamW on the pre-scaled gradient (rel err %.1e, moments %.1e)", e, em);
    tap_check(e <= 1e-6 && em <= 1e-6, name);
    /* mixed precision: the same step from the bf16 gradient, then the parameters rounded */
    for (size_t i = 0; i < n; i++) gs[i] = coef * pl_bf16_to_float(gb[i]);
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
    kern_optim_adamw_ref(p2, m2, v2, gs, n, 1e-2f, 0.9f, 0.95f, 1e-6f, 0.1f, 3);
    uint16_t *dout = pl_malloc(n * 2), *out = malloc(n * 2);
    pl_upload(dp, p, n * 4), pl_upload(dm, m, n * 4), pl_upload(dv, v, n * 4);
    kern_clip_adamw_bf16(dp, dm, dv, dgb, dc, dout, n, 1e-2f, 0.9f, 0.95f, 1e-6f, 0.1f, 3, NULL);
    free(hp);
    hp = download(dp, n);
    pl_download(out, dout, n * 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != pl_bf16_from_float(hp[i]);
    e = rel_err_ff(hp, p2, n);
    snprintf(name, sizeof name, "kern_clip_adamw_bf16: fp32 master as AdamW from the bf16 gradient (rel err %.1e), bf16 "
                                "parameters its rounding (%zu differ)", e, bad);
    tap_check(e <= 1e-6 && bad == 0, name);
    pl_free(dg), pl_free(acc), pl_free(dgb), pl_free(din), pl_free(dp), pl_free(dm), pl_free(dv), pl_free(dc), pl_free(dout);
    free(g), free(gb), free(p), free(m), free(v), free(p2), free(m2), free(v2), free(gs), free(hp), free(hm), free(out);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    test_bf16();
    test_clip();
    return tap_finish();
}
